package errand

import (
	"context"
	"encoding/json"
	"time"

	"github.com/errandhq/errand/internal/schedule"
	"github.com/errandhq/errand/internal/scheduler"
	"github.com/errandhq/errand/store"
)

// Schedule is work that starts by itself: at times (cron, interval,
// heartbeat) or on journal events (event).
type Schedule = store.Schedule

// Schedule kinds (ScheduleParams.Kind).
const (
	ScheduleCron      = store.ScheduleCron
	ScheduleInterval  = store.ScheduleInterval
	ScheduleEvent     = store.ScheduleEvent
	ScheduleHeartbeat = store.ScheduleHeartbeat
)

// Overlap policies (ScheduleParams.Overlap): what a firing does while the
// schedule's last task has not ended.
const (
	// OverlapSkip makes no task. The default.
	OverlapSkip = store.OverlapSkip
	// OverlapBufferOne makes one task that waits for the last one to end;
	// while one waits, further firings skip.
	OverlapBufferOne = store.OverlapBufferOne
	// OverlapAllowAll makes a task every time.
	OverlapAllowAll = store.OverlapAllowAll
	// OverlapCancelPrevious cancels the last task (and its subtasks),
	// then makes the new one.
	OverlapCancelPrevious = store.OverlapCancelPrevious
)

// Schedule events.
const (
	EventScheduleFired   = store.EventScheduleFired
	EventScheduleSkipped = store.EventScheduleSkipped
)

// ScheduleParams is a whole schedule: to create one, or as errand.yaml
// declares it.
type ScheduleParams struct {
	Name string
	// Kind is ScheduleCron, ScheduleInterval, ScheduleEvent or
	// ScheduleHeartbeat.
	Kind string
	// Spec is the cron expression or the Go duration, or for kind event
	// the JSON of {"type": "…", "match": {…}}.
	Spec     string
	Timezone string
	// CatchUp is what a schedule does about the firings it missed while
	// no engine ran: "one" (default) fires once for them all, "none"
	// skips them.
	CatchUp string
	// Overlap is what a firing does while the last task has not ended:
	// OverlapSkip (default), OverlapBufferOne, OverlapAllowAll or
	// OverlapCancelPrevious.
	Overlap     string
	ActiveHours string // heartbeat only: HH:MM-HH:MM in Timezone
	Enabled     *bool  // default true
	// Task is the template of the tasks the schedule makes: a POST
	// /api/tasks body; a heartbeat's may name a prompt_file instead of a
	// goal.
	Task       json.RawMessage
	StuckAfter time.Duration // heartbeat only; default 30m
	// EscalateTo is, for a heartbeat, the agent its scout's escalations
	// go to ("": the scout cannot escalate). MaxEscalationsPerDay caps
	// them per UTC day (nil: 3; 0 forbids), and EscalationBudget is each
	// escalated task's budget (nil: the default task budget). Heartbeat
	// only.
	EscalateTo           string
	MaxEscalationsPerDay *int
	EscalationBudget     *Budget
}

// SchedulePatch changes some fields of a schedule; nil fields stay.
type SchedulePatch struct {
	Enabled     *bool
	Spec        *string
	Timezone    *string
	CatchUp     *string
	Overlap     *string
	ActiveHours *string
	Task        json.RawMessage
	StuckAfter  *time.Duration
	// EscalateTo, MaxEscalationsPerDay and EscalationBudget change the
	// heartbeat's escalation; an empty EscalateTo removes it (with its cap
	// and budget).
	EscalateTo           *string
	MaxEscalationsPerDay *int
	EscalationBudget     *Budget
}

var (
	// ErrNameTaken is returned for a schedule name another schedule has.
	ErrNameTaken = store.ErrNameTaken
	// ErrDeclared is returned for deleting a schedule errand.yaml declares.
	ErrDeclared = scheduler.ErrDeclared
)

// CreateSchedule validates and stores a schedule; its first firing is the
// first slot after now. A bad field is a *ValidationError naming it, a
// template naming an unknown agent one too, and nothing is written.
func (c *Client) CreateSchedule(ctx context.Context, p *ScheduleParams) (*Schedule, error) {
	return engineResult(c.engine.Scheduler().Create(ctx, (*scheduler.Params)(p)))
}

// Schedule returns a schedule by id or name; an unknown one matches
// ErrNotFound.
func (c *Client) Schedule(ctx context.Context, idOrName string) (*Schedule, error) {
	return engineResult(c.engine.Scheduler().Get(ctx, idOrName))
}

// Schedules lists every schedule by name.
func (c *Client) Schedules(ctx context.Context) ([]*Schedule, error) {
	return engineResult(c.engine.Scheduler().List(ctx))
}

// SchedulePage lists up to limit schedules (1 to 1,000) named after
// after, by name; next is the cursor (after) of the following page, ""
// on the last.
func (c *Client) SchedulePage(ctx context.Context, after string, limit int) (page []*Schedule, next string, err error) {
	page, next, err = c.engine.Scheduler().Page(ctx, after, limit)
	return page, next, engineError(err)
}

// UpdateSchedule changes some fields of a schedule.
func (c *Client) UpdateSchedule(ctx context.Context, idOrName string, patch *SchedulePatch) (*Schedule, error) {
	return engineResult(c.engine.Scheduler().Update(ctx, idOrName, (*scheduler.Patch)(patch)))
}

// DeleteSchedule removes a schedule; the tasks it made stay.
func (c *Client) DeleteSchedule(ctx context.Context, idOrName string) error {
	return engineError(c.engine.Scheduler().Delete(ctx, idOrName))
}

// RunSchedule fires a schedule now and returns the task it made; its next
// run does not move.
func (c *Client) RunSchedule(ctx context.Context, idOrName string) (*Task, error) {
	return engineResult(c.engine.Scheduler().RunNow(ctx, idOrName))
}

// ApplySchedules makes the declared schedules exactly these (see the
// schedules: section of errand.yaml).
func (c *Client) ApplySchedules(ctx context.Context, declared []*ScheduleParams) error {
	params := make([]*scheduler.Params, len(declared))
	for i, p := range declared {
		params[i] = (*scheduler.Params)(p)
	}
	return engineError(c.engine.Scheduler().ApplyDeclared(ctx, params))
}

// PostEvent journals an external event, with actor external, for event
// schedules to hear. Its type must not start with task.
func (c *Client) PostEvent(ctx context.Context, typ string, data json.RawMessage) (*Event, error) {
	return engineResult(c.engine.PostEvent(ctx, typ, data))
}

// NextRuns returns up to n coming firings of a schedule from its next
// run; none for an event schedule or a disabled one.
func NextRuns(sc *Schedule, n int) []time.Time {
	if sc == nil || sc.NextRunAt.IsZero() || n < 1 {
		return nil
	}
	spec, err := schedule.Parse(sc.Kind, sc.Spec, sc.Timezone, sc.ActiveHours)
	if err != nil {
		return nil
	}
	return append([]time.Time{sc.NextRunAt}, spec.NextN(sc.NextRunAt, n-1)...)
}
