package scheduler

import (
	"context"
	"log/slog"
	"time"

	"github.com/errandhq/errand/internal/schedule"
	"github.com/errandhq/errand/internal/tasktemplate"
	"github.com/errandhq/errand/internal/validation"
	"github.com/errandhq/errand/store"
)

// DefaultStuckAfter is how long a task runs before a heartbeat scout hears
// it may be stuck, unless its schedule says otherwise.
const DefaultStuckAfter = 30 * time.Minute

// scoutListLimit bounds each list of tasks a scout's context carries.
const scoutListLimit = 20

// fireTimed fires a due cron, interval or heartbeat schedule, coalescing
// or dropping missed firings as its catch_up says. It returns the
// schedule as it now stands (nil if that is unknown).
func (s *Scheduler) fireTimed(ctx context.Context, sc *store.Schedule, now time.Time) *store.Schedule {
	log := s.logger.With(slog.String("schedule", sc.Name))
	spec, err := schedule.Parse(sc.Kind, sc.Spec, sc.Timezone, sc.ActiveHours)
	if err != nil {
		log.ErrorContext(ctx, "stored schedule does not parse", slog.String("error", err.Error()))
		return nil
	}
	catchUp, _ := schedule.ParseCatchUp(sc.CatchUp)
	fire, skipped, newNext := spec.Due(sc.NextRunAt, now, catchUp)
	params := &store.ScheduleFireParams{
		ID: sc.ID, NextRunAt: sc.NextRunAt, NewNextRunAt: newNext,
		EventCursor: sc.EventCursor, NewEventCursor: sc.EventCursor,
		Actor: store.ScheduleActor(sc.ID), Now: s.eng.Stamp(),
	}
	skip := &SkippedData{ScheduleID: sc.ID, Name: sc.Name, CatchUp: sc.CatchUp, From: sc.NextRunAt}
	if fire {
		task, err := s.firingTask(ctx, sc, now, nil)
		if err != nil {
			log.ErrorContext(ctx, "schedule cannot make its task", slog.String("error", err.Error()))
			skipped++
			skip.Reason = err.Error()
		} else {
			params.Task = task
			params.Fired = &FiredData{ScheduleID: sc.ID, Name: sc.Name, Kind: sc.Kind, ScheduledFor: sc.NextRunAt}
		}
	}
	if skipped > 0 {
		skip.Skipped = skipped
		if params.Task != nil {
			// The firing stands for the oldest slot; the skipped ones
			// follow it.
			skip.From, _ = spec.Next(sc.NextRunAt)
		}
		params.Skipped, params.SkippedData = skipped, skip
	}
	return s.fire(ctx, sc, params, now.Sub(sc.NextRunAt))
}

// firingTask is the task one firing of sc makes at now; ev is the event
// that fired an event schedule.
func (s *Scheduler) firingTask(ctx context.Context, sc *store.Schedule, now time.Time, ev *eventMatch) (*store.TaskInsertParams, error) {
	t, err := s.eng.Template(ctx, "task", sc.Task, sc.Kind == store.ScheduleHeartbeat)
	if err != nil {
		return nil, err
	}
	f := &Firing{Actor: store.ScheduleActor(sc.ID)}
	switch sc.Kind {
	case store.ScheduleHeartbeat:
		f.Source, f.Scout = store.SourceHeartbeat, true
		if t.PromptFile != "" {
			goal, err := tasktemplate.ReadPromptFile(t.PromptFile)
			if err != nil {
				return nil, validation.Unprocessable("task.prompt_file", "%v", err)
			}
			f.Goal = goal
			if t.Title == "" {
				f.Title = "Heartbeat " + sc.Name
			}
		}
		world, err := s.scoutContext(ctx, sc, now)
		if err != nil {
			return nil, err
		}
		f.Input = map[string]any{"heartbeat": world}
	case store.ScheduleEvent:
		f.Source = store.SourceEvent + ":" + sc.ID
		f.Input = map[string]any{"event": nil} // run by hand: no event
		if ev != nil {
			f.Input["event"] = ev.event
			if ev.task != nil {
				f.Input["task"] = tasktemplate.FromTask(ev.task)
			}
		}
	default:
		f.Source = store.SourceSchedule + ":" + sc.ID
	}
	return s.eng.FiringTask(ctx, t, f)
}

// ScoutWorld is what a heartbeat scout is told of the world (its input's
// "heartbeat"): tasks that failed since its last firing, run suspiciously
// long, or wait long for a person.
type ScoutWorld struct {
	// Schedule is the heartbeat that fired the scout; EscalateTo the agent
	// its escalations go to, if any (the scout is offered escalate then).
	Schedule   *ScheduleRef `json:"schedule,omitempty"`
	EscalateTo string       `json:"escalate_to,omitempty"`
	Since      time.Time    `json:"since,omitzero"`
	Now        time.Time    `json:"now"`
	Failed     []*ScoutTask `json:"failed"`
	Stuck      []*ScoutTask `json:"stuck"`
	Waiting    []*ScoutTask `json:"waiting"`
}

// ScheduleRef names a heartbeat schedule in a scout's input and an
// escalated task's.
type ScheduleRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// ScoutTask is a task as a scout sees it.
type ScoutTask struct {
	ID        string           `json:"id"`
	Title     string           `json:"title"`
	Agent     string           `json:"agent"`
	Status    store.Status     `json:"status"`
	Error     *store.TaskError `json:"error,omitempty"`
	StartedAt time.Time        `json:"started_at,omitzero"`
	UpdatedAt time.Time        `json:"updated_at"`
}

func (s *Scheduler) scoutContext(ctx context.Context, sc *store.Schedule, now time.Time) (*ScoutWorld, error) {
	stuckAfter := time.Duration(sc.StuckAfter)
	if stuckAfter <= 0 {
		stuckAfter = DefaultStuckAfter
	}
	w := &ScoutWorld{Schedule: &ScheduleRef{ID: sc.ID, Name: sc.Name}, Since: sc.LastRunAt, Now: now,
		Failed: []*ScoutTask{}, Stuck: []*ScoutTask{}, Waiting: []*ScoutTask{}}
	if sc.Escalation != nil && sc.Escalation.MaxPerDay > 0 {
		w.EscalateTo = sc.Escalation.To
	}
	lists := []struct {
		status store.Status
		into   *[]*ScoutTask
		keep   func(*store.Task) bool
	}{
		{store.StatusFailed, &w.Failed, func(t *store.Task) bool { return t.FinishedAt.After(sc.LastRunAt) }},
		{store.StatusRunning, &w.Stuck, func(t *store.Task) bool { return now.Sub(t.StartedAt) >= stuckAfter }},
		{store.StatusInputRequired, &w.Waiting, func(t *store.Task) bool { return now.Sub(t.UpdatedAt) >= stuckAfter }},
	}
	for _, l := range lists {
		tasks, err := s.store.TaskList(ctx, &store.TaskListParams{Statuses: []store.Status{l.status}, Limit: 200})
		if err != nil {
			return nil, err
		}
		for _, t := range tasks {
			if len(*l.into) == scoutListLimit {
				break
			}
			if l.keep(t) {
				*l.into = append(*l.into, &ScoutTask{
					ID: t.ID, Title: t.Title, Agent: t.Agent, Status: t.Status, Error: t.Error,
					StartedAt: t.StartedAt, UpdatedAt: t.UpdatedAt,
				})
			}
		}
	}
	return w, nil
}

// TaskFor is the task a firing of sc would make now, without firing it: ev
// is the journal event that fires an event schedule, with its task if it
// has one (nil: fired by hand).
func (s *Scheduler) TaskFor(ctx context.Context, sc *store.Schedule, ev *store.Event, task *store.Task) (*store.TaskInsertParams, error) {
	var m *eventMatch
	if ev != nil {
		m = &eventMatch{event: ev, task: task}
	}
	return s.firingTask(ctx, sc, s.clock.Now(), m)
}
