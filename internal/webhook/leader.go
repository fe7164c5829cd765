package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	"github.com/errandhq/errand/internal/clock"
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

// lease is a named lease in the journal that one of the Dispatchers
// sharing it holds while it does the job the lease guards.
type lease struct {
	journal Journal
	clock   clock.Clock
	name    string
	owner   string
	ttl     time.Duration
	log     *slog.Logger
	what    string // the job, in log messages: "webhook", "push"
}

// lead runs the hook until ctx ends: see lease.hold.
func (h *deliverer) lead(ctx context.Context) {
	if len(h.hook.Key) == 0 {
		h.log.WarnContext(ctx, "webhook has no secret: deliveries are unsigned")
	}
	l := &lease{journal: h.cfg.Journal, clock: h.cfg.Clock, name: h.cursor, owner: h.cfg.Owner, ttl: h.cfg.LeaseTTL, log: h.log, what: "webhook"}
	l.hold(ctx, h.run)
}

// hold runs work until ctx ends: it asks for the lease at once and every
// ttl/3, runs work while it holds it, and stops it as soon as a renewal is
// refused or fails (work's context then ends with cause errLeaseLost).
// Each call is bounded by ttl/3, so a holder cut off from the journal
// stops before its lease could expire and another owner take it. At the
// end it waits for work to return, then releases the lease so that
// another Dispatcher takes over at once.
func (l *lease) hold(ctx context.Context, work func(ctx context.Context)) {
	ticker := l.clock.NewTicker(l.ttl / 3)
	defer ticker.Stop()
	var cur *term
	defer func() {
		if cur != nil {
			cur.stop(nil)
		}
		// Released even if the last renewal failed: it may have committed.
		releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
		defer cancel()
		if err := l.journal.Unlead(releaseCtx, l.name, l.owner); err != nil {
			l.log.WarnContext(ctx, "release "+l.what+" lease", slog.String("lease", l.name), slog.Any("error", err))
		}
	}()
	for {
		held := l.renew(ctx)
		if ctx.Err() != nil {
			return
		}
		switch {
		case held && cur == nil:
			l.log.InfoContext(ctx, "holds the "+l.what+"'s lease: delivering", slog.String("owner", l.owner))
			cur = start(ctx, work)
		case !held && cur != nil:
			l.log.WarnContext(ctx, "lost the "+l.what+"'s lease: delivery stopped", slog.String("owner", l.owner))
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

// renew asks for the lease and reports whether this owner holds it.
func (l *lease) renew(ctx context.Context) bool {
	callCtx, cancel := context.WithTimeout(ctx, l.ttl/3)
	defer cancel()
	held, err := l.journal.Lead(callCtx, l.name, l.owner, l.ttl)
	if err != nil {
		if ctx.Err() == nil {
			l.log.WarnContext(ctx, "take "+l.what+" lease", slog.String("lease", l.name), slog.Any("error", err))
		}
		return false
	}
	return held
}

// start runs work in a goroutine of its own until the term is stopped.
func start(ctx context.Context, work func(ctx context.Context)) *term {
	ctx, cancel := context.WithCancelCause(ctx)
	t := &term{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		work(ctx)
	}()
	return t
}

// stop ends the term with cause (nil: a shutdown) and waits for it.
func (t *term) stop(cause error) {
	t.cancel(cause)
	<-t.done
}
