package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
)

// errLeaseLost ends a delivery term whose lease could not be renewed.
var errLeaseLost = errors.New("webhook lease lost")

// defaultOwner names a Dispatcher on its leases: host:pid:random.
func defaultOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return fmt.Sprintf("%s:%d:%08x", host, os.Getpid(), rand.Uint32())
}

// term is one stretch of delivery under a held lease.
type term struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// lead runs the hook until ctx ends: it asks for the hook's lease at once
// and every LeaseTTL/3, delivers while it holds it, and stops delivering
// as soon as a renewal is refused or fails. Each call is bounded by
// LeaseTTL/3, so a holder cut off from the journal stops before its lease
// could expire and another owner take it. At the end it saves the cursor,
// then releases the lease so that another Dispatcher takes over at once.
func (h *deliverer) lead(ctx context.Context) {
	if len(h.hook.Key) == 0 {
		h.log.WarnContext(ctx, "webhook has no secret: deliveries are unsigned")
	}
	ticker := h.cfg.Clock.NewTicker(h.cfg.LeaseTTL / 3)
	defer ticker.Stop()
	var cur *term
	defer func() {
		if cur != nil {
			cur.stop(nil)
		}
		// Released even if the last renewal failed: it may have committed.
		releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
		defer cancel()
		if err := h.cfg.Journal.Unlead(releaseCtx, h.cursor, h.cfg.Owner); err != nil {
			h.log.WarnContext(ctx, "release webhook lease", slog.String("lease", h.cursor), slog.Any("error", err))
		}
	}()
	for {
		held := h.renew(ctx)
		if ctx.Err() != nil {
			return
		}
		switch {
		case held && cur == nil:
			h.log.InfoContext(ctx, "holds the webhook's lease: delivering", slog.String("owner", h.cfg.Owner))
			cur = h.start(ctx)
		case !held && cur != nil:
			h.log.WarnContext(ctx, "lost the webhook's lease: delivery stopped", slog.String("owner", h.cfg.Owner))
			cur.stop(errLeaseLost)
			cur = nil
		}
		select {
		case <-ticker.C():
		case <-ctx.Done():
			return
		}
	}
}

// renew asks for the lease and reports whether this Dispatcher holds it.
func (h *deliverer) renew(ctx context.Context) bool {
	callCtx, cancel := context.WithTimeout(ctx, h.cfg.LeaseTTL/3)
	defer cancel()
	held, err := h.cfg.Journal.Lead(callCtx, h.cursor, h.cfg.Owner, h.cfg.LeaseTTL)
	if err != nil {
		if ctx.Err() == nil {
			h.log.WarnContext(ctx, "take webhook lease", slog.String("lease", h.cursor), slog.Any("error", err))
		}
		return false
	}
	return held
}

// start delivers in a goroutine of its own until the term is stopped.
func (h *deliverer) start(ctx context.Context) *term {
	ctx, cancel := context.WithCancelCause(ctx)
	t := &term{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		h.run(ctx)
	}()
	return t
}

// stop ends the term with cause (nil: a shutdown) and waits for it.
func (t *term) stop(cause error) {
	t.cancel(cause)
	<-t.done
}
