package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/scheduler"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/internal/validation"
	"github.com/errandhq/errand/store"
)

func TestDebounceFiftySubmitsRunOneTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started := make(chan *taskrun.Info, 60)
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		started <- r.Task()
		return ok(""), nil
	})})
	const period = 5 * time.Second
	var id string
	for i := range 50 {
		res, err := b.engine.SubmitInsert(context.Background(), &SubmitParams{
			Goal: fmt.Sprintf("summarize the inbox (submit %d)", i), Debounce: &Debounce{Key: "inbox", Period: period},
		})
		require.NoError(t, err)
		if i == 0 {
			id = res.Task.ID
			require.True(t, res.Inserted)
		} else {
			require.True(t, res.Debounced)
		}
		require.Equal(t, id, res.Task.ID, "submit %d", i)
		b.clock.Advance(50 * time.Millisecond) // all within the period of the one before
	}
	waitForPoolTickers(t, b.clock, b.engine)
	b.clock.Advance(period - 50*time.Millisecond - time.Millisecond)
	requireStatus(t, b.engine, id, store.StatusPending)
	b.clock.Advance(DefaultPollInterval) // due now; the next poll claims it
	got := recv(t, started)
	require.Equal(t, id, got.ID)
	require.Equal(t, "summarize the inbox (submit 49)", got.Goal, "the last submit wins")
	waitEvent(t, b.engine, id, store.EventTaskCompleted)
	select {
	case other := <-started:
		t.Fatalf("a second task ran: %s", other.ID)
	default:
	}
	list, err := b.engine.List(context.Background(), &ListParams{Limit: 100})
	require.NoError(t, err)
	require.Len(t, list.Tasks, 1)

	// Once it ran, the key opens a new window.
	next, err := b.engine.SubmitInsert(context.Background(), &SubmitParams{Goal: "again", Debounce: &Debounce{Key: "inbox", Period: period}})
	require.NoError(t, err)
	require.True(t, next.Inserted)
	require.NotEqual(t, id, next.Task.ID)
}

func TestDebounceBadInputNamesTheField(t *testing.T) {
	t.Parallel()
	b := setup(t)
	later := testStart.Add(time.Hour)
	for _, c := range []struct {
		name  string
		p     SubmitParams
		field string
	}{
		{"EmptyKey", SubmitParams{Debounce: &Debounce{Period: time.Second}}, "debounce.key"},
		{"LongKey", SubmitParams{Debounce: &Debounce{Key: strings.Repeat("k", 201), Period: time.Second}}, "debounce.key"},
		{"BadUTF8", SubmitParams{Debounce: &Debounce{Key: "k\xff", Period: time.Second}}, "debounce.key"},
		{"ControlCharacter", SubmitParams{Debounce: &Debounce{Key: "k\n", Period: time.Second}}, "debounce.key"},
		{"ZeroPeriod", SubmitParams{Debounce: &Debounce{Key: "k"}}, "debounce.period"},
		{"NegativePeriod", SubmitParams{Debounce: &Debounce{Key: "k", Period: -time.Second}}, "debounce.period"},
		{"LongPeriod", SubmitParams{Debounce: &Debounce{Key: "k", Period: 25 * time.Hour}}, "debounce.period"},
		{"WithRunAt", SubmitParams{RunAt: &later, Debounce: &Debounce{Key: "k", Period: time.Second}}, "debounce"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.p.Goal = "g"
			_, err := b.engine.Submit(context.Background(), &c.p)
			var v *validation.Error
			require.True(t, errors.As(err, &v), "%v", err)
			require.Equal(t, c.field, v.Field)
		})
	}
	list, err := b.engine.List(context.Background(), &ListParams{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, list.Tasks, "nothing is written")
}

// An event schedule whose task template debounces makes one task of a
// burst of events, holding the last event.
func TestDebounceEventSchedule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	startPool(t, b.engine, &PoolConfig{Schedules: true, Handlers: handlers(idle)})
	sc := createSchedule(t, b.engine, &scheduler.Params{
		Name: "smoke", Kind: "event", Spec: `{"type": "deploy.finished"}`,
		Task: json.RawMessage(`{"goal": "Smoke-test production", "agent": "tester", "debounce": {"key": "smoke", "period": "1h"}}`),
	})
	for i := range 5 {
		_, err := b.engine.PostEvent(context.Background(), "deploy.finished", json.RawMessage(fmt.Sprintf(`{"version": %d}`, i)))
		require.NoError(t, err)
	}
	last, err := b.engine.store.EventLastID(context.Background())
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		b.clock.Advance(DefaultPollInterval)
		return getSchedule(t, b.engine, sc.ID).EventCursor >= last
	}, waitTimeout, time.Millisecond)

	smokes := tasksBySource(t, b.engine, "event:"+sc.ID)
	require.Len(t, smokes, 1)
	require.Equal(t, "smoke", smokes[0].DebounceKey)
	var input struct {
		Event struct {
			Data struct{ Version int } `json:"data"`
		} `json:"event"`
	}
	require.NoError(t, json.Unmarshal(smokes[0].Input, &input))
	require.Equal(t, 4, input.Event.Data.Version, "the last event's task")
}
