package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/errandhq/errand/internal/scheduler"
	"github.com/errandhq/errand/internal/tasktemplate"
	"github.com/errandhq/errand/store"
)

// The scheduler lives in internal/scheduler; these names keep the
// engine's callers compiling while they move to it.
type (
	// ScheduleParams is a whole schedule: to create one, or as errand.yaml
	// declares it.
	ScheduleParams = scheduler.Params
	// SchedulePatch changes some fields of a schedule; nil fields stay.
	SchedulePatch = scheduler.Patch
	// EventSpec is what an event schedule listens for.
	EventSpec = scheduler.EventSpec
)

const (
	// DefaultStuckAfter is how long a task runs before a heartbeat scout
	// hears it may be stuck, unless its schedule says otherwise.
	DefaultStuckAfter = scheduler.DefaultStuckAfter
	// DefaultMaxEscalationsPerDay is a heartbeat's daily cap of
	// escalations when its schedule names escalate_to and no cap.
	DefaultMaxEscalationsPerDay = scheduler.DefaultMaxEscalationsPerDay
)

// ErrDeclared is returned for deleting, through the API, a schedule that
// errand.yaml declares.
var ErrDeclared = scheduler.ErrDeclared

// Scheduler returns the engine's scheduler: schedules and their firing.
func (e *Engine) Scheduler() *scheduler.Scheduler { return e.sched }

// CreateSchedule is Scheduler().Create.
func (e *Engine) CreateSchedule(ctx context.Context, p *ScheduleParams) (*store.Schedule, error) {
	return e.sched.Create(ctx, p)
}

// Schedule is Scheduler().Get.
func (e *Engine) Schedule(ctx context.Context, idOrName string) (*store.Schedule, error) {
	return e.sched.Get(ctx, idOrName)
}

// Schedules is Scheduler().List.
func (e *Engine) Schedules(ctx context.Context) ([]*store.Schedule, error) {
	return e.sched.List(ctx)
}

// SchedulePage is Scheduler().Page.
func (e *Engine) SchedulePage(ctx context.Context, after string, limit int) ([]*store.Schedule, string, error) {
	return e.sched.Page(ctx, after, limit)
}

// UpdateSchedule is Scheduler().Update.
func (e *Engine) UpdateSchedule(ctx context.Context, idOrName string, patch *SchedulePatch) (*store.Schedule, error) {
	return e.sched.Update(ctx, idOrName, patch)
}

// DeleteSchedule is Scheduler().Delete.
func (e *Engine) DeleteSchedule(ctx context.Context, idOrName string) error {
	return e.sched.Delete(ctx, idOrName)
}

// ApplyDeclared is Scheduler().ApplyDeclared.
func (e *Engine) ApplyDeclared(ctx context.Context, declared []*ScheduleParams) error {
	return e.sched.ApplyDeclared(ctx, declared)
}

// RunSchedule is Scheduler().RunNow.
func (e *Engine) RunSchedule(ctx context.Context, idOrName string) (*store.Task, error) {
	return e.sched.RunNow(ctx, idOrName)
}

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
