package engine

import (
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"time"

	"github.com/errandhq/errand/internal/schedule"
	"github.com/errandhq/errand/internal/tasktemplate"
	"github.com/errandhq/errand/store"
)

// scoutListLimit bounds each list of tasks a scout's context carries.
const scoutListLimit = 20

// scheduleChanged wakes the schedulers of this process: a schedule was
// written, or an external event may fire one.
func (e *Engine) scheduleChanged() { e.schedules.broadcast() }

// scheduler fires this pool's share of due schedules until ctx ends. Every
// engine on a database runs one; the store's claim makes each firing
// happen once.
func (p *Pool) scheduler(ctx context.Context) {
	defer p.bg.Done()
	polled := true
	for {
		changed := p.e.schedules.wait()
		written := p.e.written.wait()
		wait, listening := p.e.runSchedules(ctx, polled)
		if !listening {
			written = nil // no event schedule: writes cannot fire anything
		}
		timer := p.e.clock.NewTimer(wait)
		polled = false
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
			polled = true
		case <-changed:
		case <-written:
		}
		timer.Stop()
	}
}

// runSchedules fires what is due now. It returns how long to wait before
// the next look and whether any event schedule listens to the journal.
// polled says the wait ran out, the moment to move idle event cursors.
func (e *Engine) runSchedules(ctx context.Context, polled bool) (time.Duration, bool) {
	wait := e.cfg.PollInterval
	if held, g := e.schedulesHeld(ctx); held {
		// Nothing fires while the spend guard pauses all work; events
		// heard meanwhile fire after it, timed schedules catch up.
		if d := g.PausedUntil.Sub(e.clock.Now()); d > 0 {
			wait = min(wait, d)
		}
		return wait, false
	}
	all, err := e.store.ScheduleList(ctx, &store.ScheduleListParams{EnabledOnly: true})
	if err != nil {
		if ctx.Err() == nil {
			e.logger.ErrorContext(ctx, "list schedules", slog.String("error", err.Error()))
		}
		return wait, false
	}
	var listeners []*store.Schedule
	for _, sc := range all {
		if sc.Kind == store.ScheduleEvent {
			listeners = append(listeners, sc)
			continue
		}
		if sc.NextRunAt.IsZero() {
			continue
		}
		now := e.clock.Now()
		if !now.Before(sc.NextRunAt) {
			sc = e.fireTimed(ctx, sc, now)
		}
		if sc != nil && !sc.NextRunAt.IsZero() {
			wait = min(wait, max(sc.NextRunAt.Sub(e.clock.Now()), 0))
		}
	}
	if len(listeners) > 0 {
		e.fireEvents(ctx, listeners, polled)
	}
	return wait, len(listeners) > 0
}

// firedData is the payload of a schedule.fired event.
type firedData struct {
	ScheduleID   string    `json:"schedule_id"`
	Name         string    `json:"name"`
	Kind         string    `json:"kind"`
	ScheduledFor time.Time `json:"scheduled_for,omitzero"`
	EventID      int64     `json:"event_id,omitempty"`
	Manual       bool      `json:"manual,omitempty"`
}

// skippedData is the payload of a schedule.skipped event.
type skippedData struct {
	ScheduleID string    `json:"schedule_id"`
	Name       string    `json:"name"`
	Skipped    int       `json:"skipped"`
	CatchUp    string    `json:"catch_up,omitempty"`
	From       time.Time `json:"from,omitzero"`
	Reason     string    `json:"reason,omitempty"`
}

// fireTimed fires a due cron, interval or heartbeat schedule, coalescing
// or dropping missed firings as its catch_up says. It returns the
// schedule as it now stands (nil if that is unknown).
func (e *Engine) fireTimed(ctx context.Context, sc *store.Schedule, now time.Time) *store.Schedule {
	log := e.logger.With(slog.String("schedule", sc.Name))
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
		Actor: store.ScheduleActor(sc.ID), Now: e.now(),
	}
	skip := &skippedData{ScheduleID: sc.ID, Name: sc.Name, CatchUp: sc.CatchUp, From: sc.NextRunAt}
	if fire {
		task, err := e.firingTask(ctx, sc, now, nil)
		if err != nil {
			log.ErrorContext(ctx, "schedule cannot make its task", slog.String("error", err.Error()))
			skipped++
			skip.Reason = err.Error()
		} else {
			params.Task = task
			params.Fired = &firedData{ScheduleID: sc.ID, Name: sc.Name, Kind: sc.Kind, ScheduledFor: sc.NextRunAt}
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
	return e.fire(ctx, sc, params, now.Sub(sc.NextRunAt))
}

// fire writes one claim and reports what came of it.
func (e *Engine) fire(ctx context.Context, sc *store.Schedule, params *store.ScheduleFireParams, lag time.Duration) *store.Schedule {
	res, err := e.store.ScheduleFire(ctx, params)
	if err != nil {
		if ctx.Err() == nil {
			e.logger.ErrorContext(ctx, "fire schedule", slog.String("schedule", sc.Name), slog.String("error", err.Error()))
		}
		return nil
	}
	if !res.Claimed {
		return res.Schedule
	}
	if res.Task != nil {
		if f := e.cfg.OnScheduleFired; f != nil {
			f(sc.Kind, lag)
		}
		e.madeReady()
	} else if params.Skipped > 0 || res.OverlapSkipped {
		e.wrote()
	}
	return res.Schedule
}

// RunSchedule fires a schedule now, whatever its next run, which stays.
func (e *Engine) RunSchedule(ctx context.Context, idOrName string) (*store.Task, error) {
	sc, err := e.Schedule(ctx, idOrName)
	if err != nil {
		return nil, err
	}
	task, err := e.firingTask(ctx, sc, e.clock.Now(), nil)
	if err != nil {
		return nil, err
	}
	res, err := e.store.ScheduleFire(ctx, &store.ScheduleFireParams{
		ID: sc.ID, Manual: true, Task: task, Actor: store.ActorUser, Now: e.now(),
		Fired: &firedData{ScheduleID: sc.ID, Name: sc.Name, Kind: sc.Kind, Manual: true},
	})
	if err != nil {
		return nil, err
	}
	e.madeReady()
	return res.Task, nil
}

// firingTask is the task one firing of sc makes at now; ev is the event
// that fired an event schedule.
func (e *Engine) firingTask(ctx context.Context, sc *store.Schedule, now time.Time, ev *eventMatch) (*store.TaskInsertParams, error) {
	t, p, err := e.templateParams(ctx, "task", sc.Task, sc.Kind == store.ScheduleHeartbeat, 0)
	if err != nil {
		return nil, err
	}
	p.Actor = store.ScheduleActor(sc.ID)
	switch sc.Kind {
	case store.ScheduleHeartbeat:
		p.Source, p.Scout, p.ResultRoute, p.Chain = store.SourceHeartbeat, true, store.ResultRouteSilent, nil
		if t.PromptFile != "" {
			if p.Goal, err = readPrompt("task.prompt_file", t.PromptFile); err != nil {
				return nil, err
			}
			if t.Title == "" {
				p.Title = "Heartbeat " + sc.Name
			}
		}
		world, err := e.scoutContext(ctx, sc, now)
		if err != nil {
			return nil, err
		}
		if p.Input, err = mergeInput(p.Input, map[string]any{"heartbeat": world}); err != nil {
			return nil, err
		}
	case store.ScheduleEvent:
		p.Source = store.SourceEvent + ":" + sc.ID
		add := map[string]any{"event": nil} // run by hand: no event
		if ev != nil {
			add["event"] = ev.event
			if ev.task != nil {
				add["task"] = tasktemplate.FromTask(ev.task)
			}
		}
		if p.Input, err = mergeInput(p.Input, add); err != nil {
			return nil, err
		}
	default:
		p.Source = store.SourceSchedule + ":" + sc.ID
	}
	return e.validate(p)
}

// scoutWorld is what a heartbeat scout is told of the world: tasks that
// failed since its last firing, run suspiciously long, or wait long for a
// person.
type scoutWorld struct {
	// Schedule is the heartbeat that fired the scout; EscalateTo the agent
	// its escalations go to, if any (the scout is offered escalate then).
	Schedule   *scoutScheduleRef `json:"schedule,omitempty"`
	EscalateTo string            `json:"escalate_to,omitempty"`
	Since      time.Time         `json:"since,omitzero"`
	Now        time.Time         `json:"now"`
	Failed     []*scoutTask      `json:"failed"`
	Stuck      []*scoutTask      `json:"stuck"`
	Waiting    []*scoutTask      `json:"waiting"`
}

// scoutScheduleRef names a heartbeat schedule in a scout's input and an
// escalated task's.
type scoutScheduleRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type scoutTask struct {
	ID        string           `json:"id"`
	Title     string           `json:"title"`
	Agent     string           `json:"agent"`
	Status    store.Status     `json:"status"`
	Error     *store.TaskError `json:"error,omitempty"`
	StartedAt time.Time        `json:"started_at,omitzero"`
	UpdatedAt time.Time        `json:"updated_at"`
}

func (e *Engine) scoutContext(ctx context.Context, sc *store.Schedule, now time.Time) (*scoutWorld, error) {
	stuckAfter := time.Duration(sc.StuckAfter)
	if stuckAfter <= 0 {
		stuckAfter = DefaultStuckAfter
	}
	w := &scoutWorld{Schedule: &scoutScheduleRef{ID: sc.ID, Name: sc.Name}, Since: sc.LastRunAt, Now: now,
		Failed: []*scoutTask{}, Stuck: []*scoutTask{}, Waiting: []*scoutTask{}}
	if sc.Escalation != nil && sc.Escalation.MaxPerDay > 0 {
		w.EscalateTo = sc.Escalation.To
	}
	lists := []struct {
		status store.Status
		into   *[]*scoutTask
		keep   func(*store.Task) bool
	}{
		{store.StatusFailed, &w.Failed, func(t *store.Task) bool { return t.FinishedAt.After(sc.LastRunAt) }},
		{store.StatusRunning, &w.Stuck, func(t *store.Task) bool { return now.Sub(t.StartedAt) >= stuckAfter }},
		{store.StatusInputRequired, &w.Waiting, func(t *store.Task) bool { return now.Sub(t.UpdatedAt) >= stuckAfter }},
	}
	for _, l := range lists {
		tasks, err := e.store.TaskList(ctx, &store.TaskListParams{Statuses: []store.Status{l.status}, Limit: 200})
		if err != nil {
			return nil, err
		}
		for _, t := range tasks {
			if len(*l.into) == scoutListLimit {
				break
			}
			if l.keep(t) {
				*l.into = append(*l.into, &scoutTask{
					ID: t.ID, Title: t.Title, Agent: t.Agent, Status: t.Status, Error: t.Error,
					StartedAt: t.StartedAt, UpdatedAt: t.UpdatedAt,
				})
			}
		}
	}
	return w, nil
}

// eventMatch is a journal event an event schedule heard, with its task.
type eventMatch struct {
	event *store.Event
	task  *store.Task
}

// fireEvents fires event schedules for the journal events written since
// each last looked. Each firing moves the schedule's cursor to its event
// in the transaction that makes the task, so an event fires a schedule
// once however many engines listen. Cursors of schedules that heard
// nothing move only when polled or after a full page, to spare a write per
// event.
func (e *Engine) fireEvents(ctx context.Context, listeners []*store.Schedule, polled bool) {
	from := listeners[0].EventCursor
	for _, sc := range listeners {
		from = min(from, sc.EventCursor)
	}
	events, err := e.store.EventList(ctx, &store.EventListParams{AfterID: from, Limit: DefaultEventPageSize})
	if err != nil || len(events) == 0 {
		if err != nil && ctx.Err() == nil {
			e.logger.ErrorContext(ctx, "read journal for event schedules", slog.String("error", err.Error()))
		}
		return
	}
	last := events[len(events)-1].ID
	tasks := map[string]*store.Task{}
	for _, sc := range listeners {
		es, err := parseEventSpec(sc.Spec)
		if err != nil {
			e.logger.ErrorContext(ctx, "stored event schedule does not parse", slog.String("schedule", sc.Name), slog.String("error", err.Error()))
			continue
		}
		cursor, lost := sc.EventCursor, false
		for _, ev := range events {
			if ev.ID <= cursor || ev.Type != es.Type {
				continue
			}
			m, ok := e.matchEvent(ctx, es, ev, tasks)
			if !ok || m.task != nil && m.task.Options != nil && m.task.Options.Source == store.SourceEvent+":"+sc.ID {
				continue // not this one; or a task this schedule made, which would loop
			}
			params := &store.ScheduleFireParams{
				ID: sc.ID, NextRunAt: sc.NextRunAt, NewNextRunAt: sc.NextRunAt,
				EventCursor: cursor, NewEventCursor: ev.ID,
				Actor: store.ScheduleActor(sc.ID), Now: e.now(),
			}
			if task, err := e.firingTask(ctx, sc, e.clock.Now(), m); err != nil {
				params.Skipped = 1
				params.SkippedData = &skippedData{ScheduleID: sc.ID, Name: sc.Name, Skipped: 1, Reason: err.Error()}
			} else {
				params.Task = task
				params.Fired = &firedData{ScheduleID: sc.ID, Name: sc.Name, Kind: sc.Kind, EventID: ev.ID}
			}
			res := e.fire(ctx, sc, params, e.clock.Now().Sub(ev.CreatedAt))
			if res == nil || res.EventCursor != ev.ID {
				lost = true // another engine is ahead, or the write failed: look again later
				break
			}
			cursor = ev.ID
		}
		if !lost && cursor < last && (polled || len(events) == DefaultEventPageSize) {
			e.fire(ctx, sc, &store.ScheduleFireParams{
				ID: sc.ID, NextRunAt: sc.NextRunAt, NewNextRunAt: sc.NextRunAt,
				EventCursor: cursor, NewEventCursor: last, Now: e.now(),
			}, 0)
		}
	}
}

// matchEvent reports whether ev satisfies every entry of es.Match, looked
// up in the event's own fields, then its data, then its task's fields
// (as the API shows a task).
func (e *Engine) matchEvent(ctx context.Context, es *EventSpec, ev *store.Event, cache map[string]*store.Task) (*eventMatch, bool) {
	m := &eventMatch{event: ev}
	if ev.TaskID != "" {
		t, ok := cache[ev.TaskID]
		if !ok {
			t, _ = e.store.TaskGetByID(ctx, ev.TaskID) // a task gone matches on the event alone
			cache[ev.TaskID] = t
		}
		m.task = t
	}
	if len(es.Match) == 0 {
		return m, true
	}
	envelope := map[string]any{"id": ev.ID, "type": ev.Type, "task_id": ev.TaskID, "actor": ev.Actor}
	var data map[string]json.RawMessage
	_ = json.Unmarshal(ev.Data, &data) // data that is not an object has no fields
	var task map[string]json.RawMessage
	if m.task != nil {
		b, _ := json.Marshal(tasktemplate.FromTask(m.task))
		_ = json.Unmarshal(b, &task)
	}
	for k, want := range es.Match {
		var got any
		if v, ok := envelope[k]; ok {
			got = v
		} else if raw, ok := data[k]; ok {
			got = raw
		} else if raw, ok := task[k]; ok {
			got = raw
		} else {
			return nil, false
		}
		if !sameJSON(got, want) {
			return nil, false
		}
	}
	return m, true
}

// sameJSON compares a value with a JSON text as JSON values.
func sameJSON(got any, want json.RawMessage) bool {
	b, err := json.Marshal(got)
	if err != nil {
		return false
	}
	var a, w any
	if json.Unmarshal(b, &a) != nil || json.Unmarshal(want, &w) != nil {
		return false
	}
	return reflect.DeepEqual(a, w)
}
