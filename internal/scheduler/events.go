package scheduler

import (
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"strings"

	"github.com/errandhq/errand/internal/tasktemplate"
	"github.com/errandhq/errand/internal/validation"
	"github.com/errandhq/errand/store"
)

// EventSpec is what an event schedule listens for: events of Type whose
// fields, or whose task's fields, equal every entry of Match.
type EventSpec struct {
	Type  string                     `json:"type"`
	Match map[string]json.RawMessage `json:"match,omitempty"`
}

// ParseEventSpec reads an event schedule's spec strictly.
func ParseEventSpec(spec string) (*EventSpec, error) {
	dec := json.NewDecoder(strings.NewReader(spec))
	dec.DisallowUnknownFields()
	var es EventSpec
	if err := dec.Decode(&es); err != nil {
		return nil, validation.Invalid("spec", `must be {"type": "…", "match": {…}}: %v`, err)
	}
	if dec.More() {
		return nil, validation.Invalid("spec", "has bytes after the object")
	}
	if err := CheckEventType("spec.type", es.Type); err != nil {
		return nil, err
	}
	for k, v := range es.Match {
		if k == "" || len(k) > 100 {
			return nil, validation.Invalid("spec.match", "keys must be 1–100 bytes")
		}
		if !json.Valid(v) {
			return nil, validation.Invalid("spec.match."+k, "is not valid JSON")
		}
	}
	return &es, nil
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
func (s *Scheduler) fireEvents(ctx context.Context, listeners []*store.Schedule, polled bool) {
	from := listeners[0].EventCursor
	for _, sc := range listeners {
		from = min(from, sc.EventCursor)
	}
	events, err := s.store.EventList(ctx, &store.EventListParams{AfterID: from, Limit: s.cfg.EventPageSize})
	if err != nil || len(events) == 0 {
		if err != nil && ctx.Err() == nil {
			s.logger.ErrorContext(ctx, "read journal for event schedules", slog.String("error", err.Error()))
		}
		return
	}
	last := events[len(events)-1].ID
	tasks := map[string]*store.Task{}
	for _, sc := range listeners {
		es, err := ParseEventSpec(sc.Spec)
		if err != nil {
			s.logger.ErrorContext(ctx, "stored event schedule does not parse", slog.String("schedule", sc.Name), slog.String("error", err.Error()))
			continue
		}
		cursor, lost := sc.EventCursor, false
		for _, ev := range events {
			if ev.ID <= cursor || ev.Type != es.Type {
				continue
			}
			m, ok := s.matchEvent(ctx, es, ev, tasks)
			if !ok || m.task != nil && m.task.Options != nil && m.task.Options.Source == store.SourceEvent+":"+sc.ID {
				continue // not this one; or a task this schedule made, which would loop
			}
			params := &store.ScheduleFireParams{
				ID: sc.ID, NextRunAt: sc.NextRunAt, NewNextRunAt: sc.NextRunAt,
				EventCursor: cursor, NewEventCursor: ev.ID,
				Actor: store.ScheduleActor(sc.ID), Now: s.eng.Stamp(),
			}
			if task, err := s.firingTask(ctx, sc, s.clock.Now(), m); err != nil {
				params.Skipped = 1
				params.SkippedData = &SkippedData{ScheduleID: sc.ID, Name: sc.Name, Skipped: 1, Reason: err.Error()}
			} else {
				params.Task = task
				params.Fired = &FiredData{ScheduleID: sc.ID, Name: sc.Name, Kind: sc.Kind, EventID: ev.ID}
			}
			res := s.fire(ctx, sc, params, s.clock.Now().Sub(ev.CreatedAt))
			if res == nil || res.EventCursor != ev.ID {
				lost = true // another engine is ahead, or the write failed: look again later
				break
			}
			cursor = ev.ID
		}
		if !lost && cursor < last && (polled || len(events) == s.cfg.EventPageSize) {
			s.fire(ctx, sc, &store.ScheduleFireParams{
				ID: sc.ID, NextRunAt: sc.NextRunAt, NewNextRunAt: sc.NextRunAt,
				EventCursor: cursor, NewEventCursor: last, Now: s.eng.Stamp(),
			}, 0)
		}
	}
}

// matchEvent reports whether ev satisfies every entry of es.Match, looked
// up in the event's own fields, then its data, then its task's fields
// (as the API shows a task).
func (s *Scheduler) matchEvent(ctx context.Context, es *EventSpec, ev *store.Event, cache map[string]*store.Task) (*eventMatch, bool) {
	m := &eventMatch{event: ev}
	if ev.TaskID != "" {
		t, ok := cache[ev.TaskID]
		if !ok {
			t, _ = s.store.TaskGetByID(ctx, ev.TaskID) // a task gone matches on the event alone
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
