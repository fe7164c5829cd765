package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/errandhq/errand/internal/scheduler"
	"github.com/errandhq/errand/internal/tasktemplate"
	"github.com/errandhq/errand/store"
)

// Scheduler returns the engine's scheduler: schedules and their firing.
func (e *Engine) Scheduler() *scheduler.Scheduler { return e.sched }

// scheduleChanged wakes the schedulers of this process: a schedule was
// written, or an external event may fire one.
func (e *Engine) scheduleChanged() { e.schedules.broadcast() }

// runSchedules fires what is due now (Scheduler.RunDue).
func (e *Engine) runSchedules(ctx context.Context, polled bool) (time.Duration, bool) {
	return e.sched.RunDue(ctx, polled)
}

// scheduler fires this pool's share of due schedules until ctx ends.
func (p *Pool) scheduler(ctx context.Context) {
	defer p.bg.Done()
	p.e.sched.Run(ctx)
}

// schedulerHooks is what the scheduler is given of the engine
// (scheduler.Engine), kept off the engine's own API.
type schedulerHooks struct{ e *Engine }

var _ scheduler.Engine = schedulerHooks{}

func (h schedulerHooks) Template(ctx context.Context, field string, raw json.RawMessage, promptFileOK bool) (*tasktemplate.Template, error) {
	t, _, err := h.e.templateParams(ctx, field, raw, promptFileOK, 0)
	return t, err
}

func (h schedulerHooks) FiringTask(ctx context.Context, t *tasktemplate.Template, f *scheduler.Firing) (*store.TaskInsertParams, error) {
	p, err := templateSubmitParams("task", t)
	if err != nil {
		return nil, err
	}
	p.Actor, p.Source = f.Actor, f.Source
	if f.Scout {
		p.Scout, p.ResultRoute, p.Chain = true, store.ResultRouteSilent, nil
	}
	if f.Goal != "" {
		p.Goal = f.Goal
	}
	if f.Title != "" {
		p.Title = f.Title
	}
	if len(f.Input) > 0 {
		if p.Input, err = mergeInput(p.Input, f.Input); err != nil {
			return nil, err
		}
	}
	return h.e.validate(p)
}

func (h schedulerHooks) CheckAgent(name string) error { return h.e.checkAgent(name) }

func (h schedulerHooks) SchedulesHeld(ctx context.Context) (time.Time, bool) {
	held, g := h.e.schedulesHeld(ctx)
	if !held {
		return time.Time{}, false
	}
	return g.PausedUntil, true
}

func (h schedulerHooks) Stamp() *time.Time { return h.e.now() }

func (h schedulerHooks) Wakeups() (changed, written <-chan struct{}) {
	return h.e.schedules.wait(), h.e.written.wait()
}

func (h schedulerHooks) ScheduleChanged() { h.e.scheduleChanged() }
func (h schedulerHooks) Wrote()           { h.e.wrote() }
func (h schedulerHooks) MadeReady()       { h.e.madeReady() }
