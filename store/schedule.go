package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Schedule is one row of the schedules table: work that starts by itself,
// at times (cron, interval, heartbeat) or on journal events (event).
type Schedule struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Spec is the cron expression or duration, or for kind event the
	// compact JSON of {"type", "match"}.
	Spec        string `json:"spec"`
	Timezone    string `json:"timezone,omitempty"`
	CatchUp     string `json:"catch_up"`
	ActiveHours string `json:"active_hours,omitempty"`
	// Overlap says what a firing does while the schedule's last task has
	// not ended: OverlapSkip (the default of the timed kinds; empty is
	// stored as it), OverlapBufferOne, OverlapAllowAll (the default of
	// kind event) or OverlapCancelPrevious.
	Overlap string `json:"overlap"`
	Enabled bool   `json:"enabled"`
	// Declared marks a schedule that errand.yaml declares: the config owns
	// it, and only the config removes it.
	Declared bool `json:"declared"`
	// Task is the template of the tasks it makes: a POST /api/tasks body,
	// with prompt_file for a heartbeat.
	Task json.RawMessage `json:"task"`
	// StuckAfter is how long a running task runs before a heartbeat scout
	// is told it may be stuck.
	StuckAfter Duration `json:"stuck_after,omitzero"`
	// Escalation is, for a heartbeat, where its scout's escalations go;
	// nil when they go nowhere.
	Escalation *ScheduleEscalation `json:"escalation,omitempty"`

	// NextRunAt is the next firing, zero when none is due (disabled, kind
	// event, or no time left before the year 10000).
	NextRunAt  time.Time `json:"next_run_at,omitzero"`
	LastRunAt  time.Time `json:"last_run_at,omitzero"`
	LastTaskID string    `json:"last_task_id,omitempty"`
	FireCount  int64     `json:"fire_count"`
	// EventCursor is, for kind event, the id of the last journal event
	// the schedule has considered.
	EventCursor int64 `json:"event_cursor"`

	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Schedule kinds.
const (
	ScheduleCron      = "cron"
	ScheduleInterval  = "interval"
	ScheduleEvent     = "event"
	ScheduleHeartbeat = "heartbeat"
)

// Values of Schedule.Overlap.
const (
	// OverlapSkip makes no task while the last one has not ended.
	OverlapSkip = "skip"
	// OverlapBufferOne makes one task that waits for the last one to end
	// (whatever its outcome); while one waits, further firings skip.
	OverlapBufferOne = "buffer_one"
	// OverlapAllowAll makes a task every time.
	OverlapAllowAll = "allow_all"
	// OverlapCancelPrevious cancels the last task (and its subtasks),
	// then makes the new one.
	OverlapCancelPrevious = "cancel_previous"
)

// OverlapPlan is what a firing does about the schedule's last task.
type OverlapPlan struct {
	// Skip makes no task: the firing is journaled as schedule.skipped
	// with reason overlap.
	Skip bool
	// After is a task the new one waits for (depends_on, run whatever its
	// outcome).
	After string
	// Cancel is a task to cancel before the new one is made.
	Cancel string
}

// SkipReasonOverlap is the reason of a schedule.skipped event written
// because the schedule's last task had not ended.
const SkipReasonOverlap = "overlap"

// PlanOverlap decides a firing of a schedule whose overlap policy is
// overlap, given the schedule's last task: nil when it has none (or it was
// purged). A last task that has ended changes nothing.
func PlanOverlap(overlap string, last *Task) OverlapPlan {
	if last == nil || last.Status.Terminal() {
		return OverlapPlan{}
	}
	switch overlap {
	case OverlapAllowAll:
		return OverlapPlan{}
	case OverlapCancelPrevious:
		return OverlapPlan{Cancel: last.ID}
	case OverlapBufferOne:
		if last.Status == StatusBlocked {
			return OverlapPlan{Skip: true} // one is buffered already
		}
		return OverlapPlan{After: last.ID}
	}
	return OverlapPlan{Skip: true}
}

// OverlapOps are what a driver does, inside a firing's transaction, for
// the overlap policy: read a task (ErrNotFound once purged), journal a
// skipped firing, cancel a task and the tasks below it.
type OverlapOps struct {
	GetTask func(id string) (*Task, error)
	Skip    func(data *OverlapSkippedData) error
	Cancel  func(id, reason string) error
}

// FireOverlap decides what a firing of sc that would make task does about
// the schedule's last task (PlanOverlap) and carries it out through ops.
// It returns the task to insert: task itself, task waiting for the last
// one, or nil when the firing is skipped.
func FireOverlap(sc *Schedule, task *TaskInsertParams, ops OverlapOps) (*TaskInsertParams, error) {
	var last *Task
	if sc.LastTaskID != "" {
		var err error
		last, err = ops.GetTask(sc.LastTaskID)
		if errors.Is(err, ErrNotFound) {
			last = nil // purged
		} else if err != nil {
			return nil, err
		}
	}
	plan := PlanOverlap(sc.Overlap, last)
	switch {
	case plan.Skip:
		return nil, ops.Skip(&OverlapSkippedData{
			ScheduleID: sc.ID, Name: sc.Name, Skipped: 1, Reason: SkipReasonOverlap,
			Overlap: sc.Overlap, PreviousTaskID: sc.LastTaskID,
		})
	case plan.After != "":
		return AfterTask(task, plan.After), nil
	case plan.Cancel != "":
		return task, ops.Cancel(plan.Cancel, "the schedule "+sc.Name+" fired again")
	}
	return task, nil
}

// AfterTask is a copy of p that waits for the task after to end, whatever
// its outcome: the firing buffered behind it.
func AfterTask(p *TaskInsertParams, after string) *TaskInsertParams {
	c := *p
	c.DependsOn = append(slices.Clip(p.DependsOn), after)
	c.OnDependencyFailure = OnDependencyFailureRun
	return &c
}

// OverlapSkippedData is the payload of the schedule.skipped event of a
// firing the overlap policy skipped.
type OverlapSkippedData struct {
	ScheduleID     string `json:"schedule_id"`
	Name           string `json:"name"`
	Skipped        int    `json:"skipped"`
	Reason         string `json:"reason"`
	Overlap        string `json:"overlap"`
	PreviousTaskID string `json:"previous_task_id"`
}

// Schedule and external event types.
const (
	EventScheduleFired     = "schedule.fired"
	EventScheduleSkipped   = "schedule.skipped"
	EventHeartbeatDecision = "heartbeat.decision"
	EventAlert             = "alert"
)

// ActorExternal is the actor of events posted from outside (POST /api/events).
const ActorExternal = "external"

// ScheduleEscalation is where a heartbeat's escalations go: a task for
// agent To per signal, under Budget (nil: the default task budget), at
// most MaxPerDay a day (0 makes none).
type ScheduleEscalation struct {
	To        string  `json:"to"`
	MaxPerDay int     `json:"max_per_day"`
	Budget    *Budget `json:"budget,omitempty"`
}

// EncodeEscalation is how a driver stores a schedule's escalation: its
// JSON, or nil for none.
func EncodeEscalation(e *ScheduleEscalation) []byte {
	if e == nil {
		return nil
	}
	b, err := json.Marshal(e)
	if err != nil {
		panic(err) // plain fields only
	}
	return b
}

// DecodeEscalation reads what EncodeEscalation stored ("" or null: nil).
func DecodeEscalation(s string) (*ScheduleEscalation, error) {
	if s == "" || s == "null" {
		return nil, nil
	}
	var e ScheduleEscalation
	if err := json.Unmarshal([]byte(s), &e); err != nil {
		return nil, fmt.Errorf("schedule escalation: %w", err)
	}
	return &e, nil
}

// EscalationParams are a heartbeat scout's escalations, made in the
// transaction that completes it (TaskFinishParams.Escalation) if and only
// if it ends completed. The schedule's row is locked (or the write
// serialized) while its count of escalations made on Day is read: Tasks
// are made in order while the count stays below Max, and the count grows
// by as many. Two scouts of one schedule finishing at once thus never
// make more than Max between them. A schedule that is gone makes none.
type EscalationParams struct {
	ScheduleID string
	// Day is the day the count is of, as the engine names it
	// ("2006-01-02", UTC): a count of another day starts again from 0.
	Day   string
	Max   int
	Tasks []*TaskInsertParams
	// Record is told how many of Tasks are made (the first ones) and
	// returns the finish's result, in place of TaskFinishParams.Result,
	// and the events to append besides TaskFinishParams.Events. It may be
	// called more than once (a retried transaction) and must depend only
	// on made.
	Record func(made int) (result json.RawMessage, events []EventAppend)
}

// PlanEscalation is how many of p's tasks are made, given the schedule's
// count (day and number) as read, and the count to write. found is false
// for a schedule that is gone: none are made.
func PlanEscalation(p *EscalationParams, found bool, day string, count int) (made, newCount int) {
	if day != p.Day {
		count = 0
	}
	if !found {
		return 0, count
	}
	made = min(len(p.Tasks), max(p.Max-count, 0))
	return made, count + made
}

// ScheduleActor is the actor of writes a schedule makes.
func ScheduleActor(id string) string { return "schedule:" + id }

// ErrNameTaken is returned for a schedule whose name another one has.
var ErrNameTaken = errors.New("errand: the name is taken")

// ScheduleInsertParams writes a new schedule. The engine has validated it;
// the counters and times the store keeps (last run, fire count,
// created_at…) are ignored.
type ScheduleInsertParams struct {
	Schedule *Schedule
	Now      *time.Time
}

// ScheduleUpdateParams replaces what may change of a schedule: name, kind,
// spec, timezone, catch_up, active_hours, enabled, declared, task,
// stuck_after and next_run_at. Its history (last run, last task, fire
// count) is kept. The event cursor is kept unless ResetCursor holds.
type ScheduleUpdateParams struct {
	Schedule    *Schedule
	ResetCursor bool
	Now         *time.Time
}

// ScheduleListParams filters ScheduleList. Empty fields do not filter.
type ScheduleListParams struct {
	Kinds []string
	// EnabledOnly lists enabled schedules only.
	EnabledOnly bool
	// DueBy lists enabled schedules whose next_run_at is at or before it.
	DueBy time.Time
	// AfterName lists the schedules named after it (a page's cursor);
	// Limit, when > 0, bounds how many are listed.
	AfterName string
	Limit     int
}

// ScheduleFireParams claims one firing of a schedule. The claim holds only
// if the row still has the next_run_at and event_cursor the caller read:
// then, in one transaction, they become NewNextRunAt and NewEventCursor,
// Task (if any) is inserted with a schedule.fired event, a
// schedule.skipped event records Skipped missed firings, and the
// schedule's last run, last task and fire count follow. Otherwise another
// engine fired it first and nothing is written.
//
// A firing that would make a task follows the schedule's overlap policy
// (PlanOverlap), decided from its last task in the same transaction; a run
// now (Manual) is an explicit request and always makes its task.
type ScheduleFireParams struct {
	ID             string
	NextRunAt      time.Time // as read; zero for none
	NewNextRunAt   time.Time
	EventCursor    int64 // as read
	NewEventCursor int64
	// Manual fires now without looking at or moving next_run_at or
	// event_cursor (run now).
	Manual bool
	// Task is the task to make; nil advances the schedule without firing.
	Task *TaskInsertParams
	// Fired is the payload of the schedule.fired event.
	Fired any
	// Skipped counts the missed firings dropped or coalesced; SkippedData
	// is the payload of the schedule.skipped event it writes.
	Skipped     int
	SkippedData any
	Actor       string
	Now         *time.Time
}

// ScheduleFireResult is what a firing wrote.
type ScheduleFireResult struct {
	// Claimed is false when the schedule had moved on (another engine
	// fired it, or it changed) and nothing was written.
	Claimed  bool
	Schedule *Schedule
	Task     *Task // nil when no task was made
	// OverlapSkipped says the overlap policy kept the firing from making
	// its task.
	OverlapSkipped bool
}

// EventInsertParams appends one event that is not about a status change:
// an external event, an alert.
type EventInsertParams struct {
	Type   string
	TaskID string
	Actor  string
	Data   json.RawMessage
	Now    *time.Time
}

// EventAppend is an event a finish writes besides its transition, in the
// same transaction (a scout's decision, an alert).
type EventAppend struct {
	Type   string
	TaskID string
	Actor  string
	Data   any
}
