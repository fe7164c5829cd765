package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/errandhq/errand/store/sqlitestore/sqlitetest"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/id"
	"github.com/errandhq/errand/internal/tasktemplate"
	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/sqlitestore"
)

// storeEngine is a scheduler.Engine that takes templates as they are and
// makes tasks of them without the engine's checks: enough to test firing
// against a real store.
type storeEngine struct {
	clock *clock.Fake
}

func (f *storeEngine) Template(_ context.Context, _ string, raw json.RawMessage, _ bool) (*tasktemplate.Template, error) {
	var t tasktemplate.Template
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return nil, err
	}
	return &t, nil
}

func (f *storeEngine) FiringTask(_ context.Context, t *tasktemplate.Template, fr *Firing) (*store.TaskInsertParams, error) {
	input, err := json.Marshal(fr.Input)
	if err != nil {
		return nil, err
	}
	return &store.TaskInsertParams{
		ID: id.New(id.Task), RunID: id.New(id.Run), Agent: "default", Title: t.Goal, Goal: t.Goal,
		Input: input, Metadata: json.RawMessage(`{}`), Priority: 5, MaxAttempts: 1,
		Options: &store.Options{Source: fr.Source}, Actor: fr.Actor, Now: f.Stamp(),
	}, nil
}

func (f *storeEngine) CheckAgent(string) error                         { return nil }
func (f *storeEngine) SchedulesHeld(context.Context) (time.Time, bool) { return time.Time{}, false }
func (f *storeEngine) Stamp() *time.Time                               { now := f.clock.Now(); return &now }
func (f *storeEngine) Wakeups() (changed, written <-chan struct{})     { return nil, nil }
func (f *storeEngine) ScheduleChanged()                                {}
func (f *storeEngine) Wrote()                                          {}
func (f *storeEngine) MadeReady()                                      {}

// TestTimedScheduleFiresOncePerSlot: two schedulers on one store race for
// each slot; the store's claim makes it fire once.
func TestTimedScheduleFiresOncePerSlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 4, 5, 6, 0, 0, time.UTC))
	path := sqlitetest.Path(t)
	open := func() *Scheduler {
		st, err := sqlitestore.Open(ctx, path, nil)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, st.Close()) })
		return New(st, &storeEngine{clock: clk}, &Config{Clock: clk})
	}
	a, b := open(), open()

	sc, err := a.Create(ctx, &Params{Name: "tick", Kind: store.ScheduleInterval, Spec: "1m", Overlap: "allow_all", Task: json.RawMessage(`{"goal": "tick"}`)})
	require.NoError(t, err)
	require.Equal(t, clk.Now().Add(time.Minute), sc.NextRunAt)

	for slot := 1; slot <= 3; slot++ {
		clk.Advance(time.Minute)
		a.RunDue(ctx, true)
		b.RunDue(ctx, true)
		got, err := b.Get(ctx, "tick")
		require.NoError(t, err)
		require.EqualValues(t, slot, got.FireCount)
	}
	tasks, err := a.store.TaskList(ctx, &store.TaskListParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, tasks, 3)
	for _, task := range tasks {
		require.Equal(t, store.SourceSchedule+":"+sc.ID, task.Options.Source)
	}
}

// TestEventScheduleFiresOnMatchingEvents: an event schedule hears the
// events written after it whose fields match, each once, and hands the
// event to its task.
func TestEventScheduleFiresOnMatchingEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 3, 4, 5, 6, 0, 0, time.UTC))
	st, err := sqlitestore.Open(ctx, sqlitetest.Path(t), nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	eng := &storeEngine{clock: clk}
	s := New(st, eng, &Config{Clock: clk})

	post := func(env string) *store.Event {
		ev, err := st.EventInsert(ctx, &store.EventInsertParams{
			Type: "deploy.finished", Actor: store.ActorExternal, Data: json.RawMessage(`{"env": "` + env + `"}`), Now: eng.Stamp(),
		})
		require.NoError(t, err)
		return ev
	}
	post("prod") // before the schedule: not heard
	sc, err := s.Create(ctx, &Params{
		Name: "on-deploy", Kind: store.ScheduleEvent, Overlap: "allow_all",
		Spec: `{"type": "deploy.finished", "match": {"env": "prod"}}`, Task: json.RawMessage(`{"goal": "check"}`),
	})
	require.NoError(t, err)
	post("dev")
	prod := post("prod")

	for range 2 { // the second look finds nothing new
		s.RunDue(ctx, true)
	}
	tasks, err := st.TaskList(ctx, &store.TaskListParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	require.Equal(t, store.SourceEvent+":"+sc.ID, tasks[0].Options.Source)
	var in struct {
		Event store.Event `json:"event"`
	}
	require.NoError(t, json.Unmarshal(tasks[0].Input, &in))
	require.Equal(t, prod.ID, in.Event.ID)
}
