package engine

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/pgtest"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/pgstore"
)

// pgDaemon is an engine on its own connection to a shared PostgreSQL
// schema, as a daemon would be, whose relay reports each start of
// listening.
type pgDaemon struct {
	*Engine
	listening chan struct{}
}

func openPGDaemon(t testing.TB, dsn string, clk clock.Clock) *pgDaemon {
	t.Helper()
	st, err := pgstore.Open(context.Background(), dsn, nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	e, err := New(st, &Config{Clock: clk, LeaseTTL: 30 * time.Second, PollInterval: time.Hour})
	require.NoError(t, err)
	d := &pgDaemon{Engine: e, listening: make(chan struct{}, 16)}
	e.out.relay.onListen = func() {
		select {
		case d.listening <- struct{}{}:
		default:
		}
	}
	return d
}

// A client of daemon A sees the output of a task daemon B runs: first the
// text so far, then each piece, adding up to the recorded text.
func TestLiveOutputReachesAnotherDaemon(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	clk := clock.NewFake(testStart) // never moves: no want is repeated, no poll ticks
	a, b := openPGDaemon(t, dsn, clk), openPGDaemon(t, dsn, clk)

	agent := newStreamingAgent([]string{"Hé", "llo ", "from B"}, []string{", piece", " by piece."})
	startPool(t, b.Engine, &PoolConfig{Handlers: map[string]taskrun.Handler{DefaultAgent: agent}})
	recv(t, b.listening)
	// A runs a pool too, of another agent: its signals wake A's
	// subscriptions when B writes the journal.
	startPool(t, a.Engine, &PoolConfig{Handlers: map[string]taskrun.Handler{"elsewhere": agent}})
	recv(t, a.listening)

	task := submit(t, a.Engine, &SubmitParams{Goal: "stream across daemons"})
	require.Equal(t, task.ID, recv(t, agent.mid))

	atA := followLive(t, a.Engine, EventFilter{TaskID: task.ID, Live: true})
	atA.untilText("Héllo from B")
	require.Zero(t, atA.deltas[0].Offset, "the text so far first")

	close(agent.release)
	atA.until(store.EventTaskStep)
	require.Equal(t, recordedText(t, b.Engine, task.ID), string(atA.text), "the pieces before their step")
	require.Equal(t, "Héllo from B, piece by piece.", string(atA.text))
	atA.until(store.EventTaskCompleted)
	require.Positive(t, b.out.relay.sent.Load())
}

// A task nobody follows elsewhere costs no notification.
func TestUnwatchedOutputIsNotRelayed(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	clk := clock.NewFake(testStart)
	b := openPGDaemon(t, dsn, clk)
	agent := newStreamingAgent([]string{"nobody ", "watches"}, []string{" this"})
	close(agent.release)
	startPool(t, b.Engine, &PoolConfig{Handlers: map[string]taskrun.Handler{DefaultAgent: agent}})
	recv(t, b.listening)
	task := submit(t, b.Engine, &SubmitParams{Goal: "unwatched"})
	recv(t, agent.mid)
	waitForStatus(t, b.Engine, task.ID, store.StatusCompleted)
	require.Zero(t, b.out.relay.sent.Load())
}

// When the relay's listeners lose their connections, the pieces sent
// meanwhile are lost; once they listen again the watcher asks for the
// text so far and ends with the whole text.
func TestLiveOutputSurvivesLostListeners(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	clk := clock.NewFake(testStart)
	a, b := openPGDaemon(t, dsn, clk), openPGDaemon(t, dsn, clk)
	agent := newStreamingAgent([]string{"before "}, []string{"after ", "the cut"})
	startPool(t, b.Engine, &PoolConfig{Handlers: map[string]taskrun.Handler{DefaultAgent: agent}})
	recv(t, b.listening)
	startPool(t, a.Engine, &PoolConfig{Handlers: map[string]taskrun.Handler{"elsewhere": agent}})
	recv(t, a.listening)
	task := submit(t, a.Engine, &SubmitParams{Goal: "stream through a cut"})
	recv(t, agent.mid)
	atA := followLive(t, a.Engine, EventFilter{TaskID: task.ID, Live: true})
	atA.untilText("before ")

	conn, err := pgx.Connect(t.Context(), dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var schema string
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT current_schema()`).Scan(&schema))
	var cut int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE query = $1`, `LISTEN "errand.`+schema+`/output"`).Scan(&cut))
	require.Equal(t, 2, cut)
	recv(t, a.listening)
	recv(t, b.listening)
	// The text so far comes again, whichever listened first.
	for seen := len(atA.deltas); len(atA.deltas) == seen || atA.deltas[len(atA.deltas)-1].Offset != 0; {
		atA.next()
	}
	require.Equal(t, "before ", string(atA.text))

	close(agent.release)
	atA.until(store.EventTaskStep)
	require.Equal(t, "before after the cut", string(atA.text))
}
