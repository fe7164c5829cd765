package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/errandhq/errand/store"
)

const (
	// purgeInterval is how often a pool looks for tasks past retention.
	purgeInterval = time.Minute
	// PurgeBatch is how many tasks one purge transaction removes: small
	// enough that the write lock is held for milliseconds, so workers
	// finishing tasks meanwhile barely notice.
	PurgeBatch = 100
)

// PurgeResult is what a purge removed, or would remove.
type PurgeResult struct {
	TaskIDs []string
	Rows    int64
}

// Purge removes the tasks that finished before before, batch by batch,
// with everything that belongs to them; a task an open task still refers
// to waits for it. DryRun lists them and removes nothing. OnPurged, if
// set, hears of every batch removed.
func (e *Engine) Purge(ctx context.Context, before time.Time, dryRun bool) (*PurgeResult, error) {
	out := &PurgeResult{}
	if dryRun {
		// One read: a dry run removes nothing, so there are no pages to
		// move past.
		res, err := e.store.TaskPurge(ctx, &store.TaskPurgeParams{FinishedBefore: before, Limit: 1 << 30, DryRun: true})
		if err != nil {
			return nil, err
		}
		out.TaskIDs = res.TaskIDs
		return out, nil
	}
	for {
		res, err := e.store.TaskPurge(ctx, &store.TaskPurgeParams{FinishedBefore: before, Limit: PurgeBatch})
		if err != nil {
			return out, err
		}
		out.TaskIDs = append(out.TaskIDs, res.TaskIDs...)
		out.Rows += res.Rows
		if len(res.TaskIDs) > 0 && e.cfg.OnPurged != nil {
			e.cfg.OnPurged(res.TaskIDs)
		}
		if len(res.TaskIDs) < PurgeBatch || ctx.Err() != nil {
			return out, ctx.Err()
		}
	}
}

// purgeOld is the pool's retention job: finished tasks past Retention,
// memories past MemoryRetention, each when set.
func (p *Pool) purgeOld(ctx context.Context) {
	if p.e.cfg.MemoryRetention > 0 {
		p.purgeOldMemories(ctx)
	}
	if p.e.cfg.Retention > 0 {
		p.purgeOldTasks(ctx)
	}
}

// purgeOldMemories removes the memories older than MemoryRetention.
func (p *Pool) purgeOldMemories(ctx context.Context) {
	n, before, err := p.e.mem.PurgeOlderThan(ctx, p.e.cfg.MemoryRetention)
	if err != nil && ctx.Err() == nil {
		p.logger.ErrorContext(ctx, "purge old memories", slog.String("error", err.Error()))
	}
	if n > 0 {
		p.logger.InfoContext(ctx, "purged memories past retention", slog.Int64("memories", n), slog.Time("created_before", before))
	}
}

func (p *Pool) purgeOldTasks(ctx context.Context) {
	before := p.e.clock.Now().Add(-p.e.cfg.Retention)
	res, err := p.e.Purge(ctx, before, false)
	if err != nil && ctx.Err() == nil {
		p.logger.ErrorContext(ctx, "purge finished tasks", slog.String("error", err.Error()))
	}
	if res != nil && len(res.TaskIDs) > 0 {
		p.logger.InfoContext(ctx, "purged finished tasks past retention",
			slog.Int("tasks", len(res.TaskIDs)), slog.Int64("rows", res.Rows), slog.Time("finished_before", before))
	}
}
