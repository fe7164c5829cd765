package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// Waiting on a provider that holds calls off (taskrun.RateLimited).
const (
	// rateLimitBackoffBase and rateLimitBackoffCap shape the wait when the
	// provider named none: base·2^(waits in a row - 1), ±20%, at most the
	// cap.
	rateLimitBackoffBase = time.Second
	rateLimitBackoffCap  = 5 * time.Minute
	// minRateLimitWait keeps a provider that asks for no wait at all (or a
	// date just past) from being called again in a hot loop.
	minRateLimitWait = time.Second
	// RateLimitPatience is how long a task's rate-limit waits in a row may
	// go on: a task still held off after it fails the attempt with code
	// rate_limited, retried like any other failure while attempts remain.
	RateLimitPatience = time.Hour
	// rateLimitLookback bounds how far back the journal is read to count
	// the waits in a row.
	rateLimitLookback = 2 * RateLimitPatience
	// rateLimitPage is how many events one read of that journal takes.
	rateLimitPage = 500
)

// ReasonRateLimited is the reason of the task.deferred event journaled
// when a task waits for its model provider.
const ReasonRateLimited = "rate_limited"

// RateLimitDeferral is the data of that task.deferred event.
type RateLimitDeferral struct {
	Reason     string `json:"reason"`
	Attempt    int    `json:"attempt"`
	StatusCode int    `json:"status_code,omitempty"`
	Message    string `json:"message,omitempty"`
	// RetryAfterMS is the wait the provider asked for, 0 when it named
	// none; WaitMS is the wait taken, until Until.
	RetryAfterMS int64     `json:"retry_after_ms"`
	WaitMS       int64     `json:"wait_ms"`
	Until        time.Time `json:"until"`
	// Waits counts the task's rate-limit waits in a row, this one
	// included: since it last finished a step or had a retry scheduled.
	Waits int `json:"waits"`
}

// waitRateLimit fills fp for an attempt the provider held off: the task
// goes back to pending until the wait is over, its attempt kept open, the
// progress label and a task.deferred event saying why. Past
// RateLimitPatience it is an ordinary failed attempt instead. It reports
// false when the lease turned out lost: nothing is to be written.
func (p *Pool) waitRateLimit(x *execution, limited *taskrun.RateLimited, fp *store.TaskFinishParams) bool {
	// As a step's record: written though the task is stopping, and bounded.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(x.ctx), taskrun.StepRecordTimeout)
	defer cancel()
	now := p.e.clock.Now()
	waits, first, err := p.e.rateLimitWaits(ctx, x.task.ID, now)
	if err != nil {
		// Counted as a first wait: the task still waits, never spins.
		p.logger.WarnContext(ctx, "count rate-limit waits", slog.String("task_id", x.task.ID), slog.String("error", err.Error()))
	}
	waits++
	if waits > 1 && now.Sub(first) >= RateLimitPatience {
		p.failAttempt(x, &taskrun.Error{Code: taskrun.CodeRateLimited, Retryable: true,
			Err: fmt.Errorf("held off by the provider for %s, %d waits in a row: %w", now.Sub(first).Round(time.Second), waits-1, limited)}, fp)
		return true
	}
	wait := limited.Wait
	if wait > 0 {
		// Up to a fifth more, so tasks told the same wait do not all come
		// back at once.
		wait += time.Duration(float64(wait) * 0.2 * jitter())
	} else {
		wait = backoff(waits, rateLimitBackoffBase, rateLimitBackoffCap, jitter)
	}
	wait = max(wait, minRateLimitWait)
	until := now.Add(wait).Truncate(time.Microsecond) // as the store keeps run_at
	fp.Status, fp.Actor, fp.RunAt = store.StatusPending, store.ActorSystem, until

	x.mu.Lock()
	progress := x.progress
	x.mu.Unlock()
	progress.Label = fmt.Sprintf("%s until %s", store.RateLimitLabel, until.UTC().Format(time.RFC3339))
	err = p.e.store.TaskProgress(ctx, &store.TaskProgressParams{Lease: x.lease, Progress: progress, Actor: store.ActorSystem, Now: p.e.now()})
	if errors.Is(err, store.ErrLeaseLost) {
		x.loseLease()
		return false
	}
	data, _ := json.Marshal(&RateLimitDeferral{
		Reason: ReasonRateLimited, Attempt: x.task.Attempt, StatusCode: limited.StatusCode, Message: limited.Reason,
		RetryAfterMS: limited.Wait.Milliseconds(), WaitMS: wait.Milliseconds(), Until: until.UTC(), Waits: waits,
	})
	_, evErr := p.e.store.EventInsert(ctx, &store.EventInsertParams{
		Type: store.EventTaskDeferred, TaskID: x.task.ID, Actor: store.ActorSystem, Data: data, Now: p.e.now(),
	})
	if err = errors.Join(err, evErr); err != nil {
		// The wait does not depend on them: the finish still hands the
		// task back until then.
		p.logger.WarnContext(ctx, "journal rate-limit wait", slog.String("task_id", x.task.ID), slog.String("error", err.Error()))
	}
	p.e.wrote()
	return true
}

// rateLimitWaits counts the task's rate-limit waits in a row up to now
// (the task.deferred events of reason rate_limited since it last finished
// a step or had a retry scheduled, within rateLimitLookback) and when the
// first of them was.
func (e *Engine) rateLimitWaits(ctx context.Context, taskID string, now time.Time) (waits int, first time.Time, err error) {
	params := &store.EventListParams{
		TaskID: taskID, Since: now.Add(-rateLimitLookback), Limit: rateLimitPage,
		Types: []string{store.EventTaskDeferred, store.EventTaskStep, store.EventTaskRetryScheduled},
	}
	for {
		evs, err := e.store.EventList(ctx, params)
		if err != nil {
			return 0, time.Time{}, err
		}
		for _, ev := range evs {
			params.AfterID = ev.ID
			var d struct{ Reason, Status string }
			_ = json.Unmarshal(ev.Data, &d)
			switch {
			case ev.Type == store.EventTaskDeferred && d.Reason == ReasonRateLimited:
				if waits == 0 {
					first = ev.CreatedAt
				}
				waits++
			case ev.Type == store.EventTaskRetryScheduled, ev.Type == store.EventTaskStep && d.Status == store.StepDone:
				waits = 0
			}
		}
		if len(evs) < rateLimitPage {
			return waits, first, nil
		}
	}
}
