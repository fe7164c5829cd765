package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/errandhq/errand/store"
)

// every runs f every d on the engine's clock until ctx ends.
func (p *Pool) every(ctx context.Context, d time.Duration, f func(context.Context)) {
	defer p.bg.Done()
	tick := p.e.clock.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
		f(ctx)
	}
}

// renewAll extends every lease this pool holds, in one transaction; the
// pool runs it every lease_ttl/3. A lease not renewed in time is given up
// by watchLease.
func (p *Pool) renewAll(ctx context.Context) {
	p.mu.Lock()
	execs := make([]*execution, 0, len(p.running))
	leases := make([]store.Lease, 0, len(p.running))
	for _, x := range p.running {
		execs = append(execs, x)
		leases = append(leases, x.lease)
	}
	p.mu.Unlock()
	if len(leases) == 0 {
		return
	}

	sent := p.e.clock.Now()
	results, err := p.e.store.LeaseRenewMany(ctx, &store.LeaseRenewManyParams{
		Leases: leases, TTL: p.e.cfg.LeaseTTL, Now: p.e.now(),
	})
	if err != nil {
		// Each task's watchLease stops it if no renewal lands in time.
		p.logger.ErrorContext(ctx, "renew leases", slog.Int("leases", len(leases)), slog.String("error", err.Error()))
		return
	}
	for i, res := range results {
		p.applyRenewal(execs[i], res, sent)
	}
}

// recoverInterval is how often a pool looks for expired leases: often
// enough that a dead process's tasks run again within the lease TTL and
// half a second, and the look is one indexed statement.
func recoverInterval(ttl time.Duration) time.Duration { return min(ttl/2, 500*time.Millisecond) }

// recoverExpired takes back expired leases of any owner, and ends
// questions nobody answered in time; the pool runs it every
// recoverInterval.
func (p *Pool) recoverExpired(ctx context.Context) {
	if err := p.e.Recover(ctx, nil); err != nil {
		p.logger.ErrorContext(ctx, "recover expired leases", slog.String("error", err.Error()))
	}
	n, err := p.e.store.InputExpire(ctx, p.e.now())
	if err != nil {
		p.logger.ErrorContext(ctx, "expire input requests", slog.String("error", err.Error()))
	}
	if n > 0 {
		p.e.madeReady()
	}
}

// recoverAtStart takes back expired leases, and at once those of processes
// on this host that no longer run.
func (p *Pool) recoverAtStart(ctx context.Context) error {
	owners, err := p.e.store.LeaseOwnerList(ctx)
	if err != nil {
		return err
	}
	return p.e.Recover(ctx, deadOwners(owners))
}

// Recover takes back expired leases and those held by owners, making their
// tasks claimable again.
func (e *Engine) Recover(ctx context.Context, owners []string) error {
	recovered, err := e.store.TaskRecover(ctx, &store.TaskRecoverParams{Owners: owners, Now: e.now()})
	if err != nil {
		return err
	}
	if len(recovered) > 0 {
		e.logger.WarnContext(ctx, "recovered leases", slog.Int("tasks", len(recovered)))
		e.madeReady()
	}
	return nil
}
