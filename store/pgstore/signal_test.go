package pgstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

// listenTest starts s listening and returns the signals it hears and a
// channel told each time the listener starts listening; it returns once it
// listens.
func listenTest(t *testing.T, s *Store) (<-chan store.Signal, <-chan struct{}) {
	t.Helper()
	sigs := make(chan store.Signal, 1024)
	started := make(chan struct{}, 16)
	s.listening = func() { started <- struct{}{} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Listen(ctx, func(sig store.Signal) { sigs <- sig })
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not start")
	}
	return sigs, started
}

// waitSignal waits for a signal matching want, skipping others.
func waitSignal(t *testing.T, sigs <-chan store.Signal, want store.Signal) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case sig := <-sigs:
			if sig == want {
				return
			}
		case <-timeout:
			t.Fatalf("no signal %+v", want)
		}
	}
}

// A task submitted through one process wakes a listener in another.
func TestSignalsReachOtherProcesses(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	a, b := openTest(t, dsn), openTest(t, dsn)
	sigs, _ := listenTest(t, b)

	_, err := a.TaskInsert(t.Context(), &store.TaskInsertParams{ID: "tsk_signal", RunID: "run_signal", Agent: "a", Goal: "g", MaxAttempts: 1})
	require.NoError(t, err)
	waitSignal(t, sigs, store.Signal{Kind: store.SignalWritten})
	waitSignal(t, sigs, store.Signal{Kind: store.SignalReady})
}

// A write that rolls back signals nothing.
func TestRolledBackWritesSignalNothing(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	a, b := openTest(t, dsn), openTest(t, dsn)
	sigs, _ := listenTest(t, b)

	err := a.writeTx(t.Context(), func(tx *txn) error {
		tx.signal(store.Signal{Kind: store.SignalCancel, TaskID: "tsk_rolled_back"})
		if err := tx.flush(t.Context()); err != nil {
			return err
		}
		return context.Canceled
	})
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, a.writeTx(t.Context(), func(tx *txn) error {
		tx.signal(store.Signal{Kind: store.SignalCancel, TaskID: "tsk_committed"})
		return nil
	}))
	for sig := range sigs { // the listener's start says anything may have happened; skip that
		if sig.Kind == store.SignalCancel {
			require.Equal(t, store.Signal{Kind: store.SignalCancel, TaskID: "tsk_committed"}, sig)
			break
		}
	}
}

// A listener whose connection is cut listens again and says that anything
// may have happened meanwhile.
func TestListenerReconnects(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	s := openTest(t, dsn)
	sigs, started := listenTest(t, s)

	var n int
	require.NoError(t, s.pool.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE query = $1`, `LISTEN "`+s.channel+`"`).Scan(&n))
	require.Equal(t, 1, n)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not listen again")
	}
	waitSignal(t, sigs, store.Signal{Kind: store.SignalReady})

	require.NoError(t, s.writeTx(t.Context(), func(tx *txn) error {
		tx.signal(store.Signal{Kind: store.SignalPause, TaskID: "tsk_after"})
		return nil
	}))
	waitSignal(t, sigs, store.Signal{Kind: store.SignalPause, TaskID: "tsk_after"})
}

func TestSignalPayloads(t *testing.T) {
	t.Parallel()
	var sigs []store.Signal
	for i := range 2000 {
		sigs = append(sigs, store.Signal{Kind: store.SignalCancel, TaskID: "tsk_" + strings.Repeat("x", i%20)})
	}
	sigs = append(sigs, store.Signal{Kind: store.SignalWritten}, store.Signal{Kind: store.SignalSpend})
	var got []store.Signal
	for _, p := range payloads(sigs) {
		require.LessOrEqual(t, len(p), maxPayload)
		got = append(got, decodeSignals(p)...)
	}
	require.Equal(t, sigs, got)
	require.Empty(t, decodeSignals("zz unknown"), "codes a newer errand sends are skipped")
}

// A payload from another process never panics the listener, and what it
// decodes to packs back to the same signals.
func FuzzDecodeSignals(f *testing.F) {
	f.Add("w r c:tsk_1 p:tsk_2 $ s")
	f.Add("c: p:\x00 zz")
	f.Fuzz(func(t *testing.T, payload string) {
		sigs := decodeSignals(payload)
		var again []store.Signal
		for _, p := range payloads(sigs) {
			again = append(again, decodeSignals(p)...)
		}
		if len(sigs) > 0 || len(again) > 0 {
			require.Equal(t, sigs, again)
		}
	})
}
