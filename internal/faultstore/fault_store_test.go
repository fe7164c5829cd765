package faultstore

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/errandhq/errand/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var errInjected = errors.New("injected")

// innerStore implements the few store methods the tests call; any other
// method panics on the nil embedded interface.
type innerStore struct {
	store.Store

	inserts     atomic.Int64
	checkpoints atomic.Int64
	closed      atomic.Bool
}

func (s *innerStore) TaskInsert(_ context.Context, params *store.TaskInsertParams) (*store.TaskInsertResult, error) {
	s.inserts.Add(1)
	return &store.TaskInsertResult{Task: &store.Task{ID: params.ID}, Inserted: true}, nil
}

func (s *innerStore) TaskCheckpoint(context.Context, *store.TaskCheckpointParams) error {
	s.checkpoints.Add(1)
	return nil
}

func (s *innerStore) Close() error {
	s.closed.Store(true)
	return nil
}

type testBundle struct {
	inner *innerStore
	store *Store
	ctx   context.Context
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	inner := &innerStore{}
	return &testBundle{inner: inner, store: New(inner), ctx: ctx}
}

func insert(t *testing.T, bundle *testBundle) (*store.TaskInsertResult, error) {
	t.Helper()
	return bundle.store.TaskInsert(bundle.ctx, &store.TaskInsertParams{ID: "t1"})
}

func TestStorePassesThrough(t *testing.T) {
	t.Parallel()
	bundle := setup(t)

	res, err := insert(t, bundle)
	require.NoError(t, err)
	require.Equal(t, "t1", res.Task.ID)
	require.True(t, res.Inserted)
	require.Equal(t, int64(1), bundle.inner.inserts.Load())
	require.Equal(t, 1, bundle.store.Calls("TaskInsert"))
	require.Equal(t, 0, bundle.store.Calls("TaskFinishMany"))

	require.NoError(t, bundle.store.TaskCheckpoint(bundle.ctx, &store.TaskCheckpointParams{}))
	require.Equal(t, int64(1), bundle.inner.checkpoints.Load())

	require.NoError(t, bundle.store.Close())
	require.True(t, bundle.inner.closed.Load())
}

func TestStoreInject(t *testing.T) {
	t.Parallel()

	t.Run("BeforeSkipsInner", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		bundle.store.Inject("TaskInsert", Before, errInjected, 1)
		bundle.store.Inject("TaskCheckpoint", Before, errInjected, 1)

		res, err := insert(t, bundle)
		require.ErrorIs(t, err, errInjected)
		require.Nil(t, res)
		require.Zero(t, bundle.inner.inserts.Load())

		err = bundle.store.TaskCheckpoint(bundle.ctx, &store.TaskCheckpointParams{})
		require.ErrorIs(t, err, errInjected)
		require.Zero(t, bundle.inner.checkpoints.Load())

		require.Equal(t, 1, bundle.store.Calls("TaskInsert"))
		require.Equal(t, 1, bundle.store.Calls("TaskCheckpoint"))
	})

	t.Run("AfterCallsInnerAndDiscardsResult", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		bundle.store.Inject("TaskInsert", After, errInjected, 1)
		bundle.store.Inject("TaskCheckpoint", After, errInjected, 1)

		res, err := insert(t, bundle)
		require.ErrorIs(t, err, errInjected)
		require.Nil(t, res)
		require.Equal(t, int64(1), bundle.inner.inserts.Load())

		err = bundle.store.TaskCheckpoint(bundle.ctx, &store.TaskCheckpointParams{})
		require.ErrorIs(t, err, errInjected)
		require.Equal(t, int64(1), bundle.inner.checkpoints.Load())
	})

	t.Run("TimesCountsDown", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		bundle.store.Inject("TaskInsert", Before, errInjected, 2)

		for range 2 {
			_, err := insert(t, bundle)
			require.ErrorIs(t, err, errInjected)
		}
		_, err := insert(t, bundle)
		require.NoError(t, err)
		require.Equal(t, 3, bundle.store.Calls("TaskInsert"))
		require.Equal(t, int64(1), bundle.inner.inserts.Load())
	})

	t.Run("NegativeTimesLastsUntilClear", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		bundle.store.Inject("TaskInsert", After, errInjected, -1)

		for range 20 {
			_, err := insert(t, bundle)
			require.ErrorIs(t, err, errInjected)
		}
		bundle.store.Clear("TaskInsert")
		_, err := insert(t, bundle)
		require.NoError(t, err)
		require.Equal(t, 21, bundle.store.Calls("TaskInsert"), "Clear keeps the call count")
		require.Equal(t, int64(21), bundle.inner.inserts.Load())
	})

	t.Run("ZeroTimesClears", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		bundle.store.Inject("TaskInsert", Before, errInjected, -1)
		bundle.store.Inject("TaskInsert", Before, errInjected, 0)
		_, err := insert(t, bundle)
		require.NoError(t, err)
	})

	t.Run("LaterInjectReplaces", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		errOther := errors.New("other")
		bundle.store.Inject("TaskInsert", Before, errInjected, -1)
		bundle.store.Inject("TaskInsert", After, errOther, 1)

		_, err := insert(t, bundle)
		require.ErrorIs(t, err, errOther)
		require.Equal(t, int64(1), bundle.inner.inserts.Load())
		_, err = insert(t, bundle)
		require.NoError(t, err)
	})

	t.Run("OtherPointsUnaffected", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		bundle.store.Inject("TaskCheckpoint", Before, errInjected, -1)
		_, err := insert(t, bundle)
		require.NoError(t, err)
	})
}

func TestStoreHook(t *testing.T) {
	t.Parallel()

	t.Run("RunsBeforeEachCall", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		type ctxKey struct{}
		ctx := context.WithValue(bundle.ctx, ctxKey{}, "v")

		var ran int
		bundle.store.Hook("TaskInsert", func(ctx context.Context) error {
			require.Equal(t, "v", ctx.Value(ctxKey{}))
			require.Equal(t, int64(ran), bundle.inner.inserts.Load(), "hook runs before the inner call")
			ran++
			return nil
		})
		for range 2 {
			_, err := bundle.store.TaskInsert(ctx, &store.TaskInsertParams{ID: "t1"})
			require.NoError(t, err)
		}
		require.Equal(t, 2, ran)

		bundle.store.Hook("TaskInsert", nil)
		_, err := insert(t, bundle)
		require.NoError(t, err)
		require.Equal(t, 2, ran)
	})

	t.Run("ErrorFailsBeforeAndKeepsInjection", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		errHook := errors.New("hook")
		bundle.store.Inject("TaskInsert", After, errInjected, 1)
		bundle.store.Hook("TaskInsert", func(context.Context) error { return errHook })

		_, err := insert(t, bundle)
		require.ErrorIs(t, err, errHook)
		require.Zero(t, bundle.inner.inserts.Load())

		bundle.store.Hook("TaskInsert", nil)
		_, err = insert(t, bundle)
		require.ErrorIs(t, err, errInjected, "the hook's failure did not use up the injection")
		require.Equal(t, 2, bundle.store.Calls("TaskInsert"))
	})

	t.Run("BlocksCallToStageRace", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		entered := make(chan struct{})
		release := make(chan struct{})
		bundle.store.Hook("TaskInsert", func(ctx context.Context) error {
			close(entered)
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})

		done := make(chan error, 1)
		go func() {
			_, err := insert(t, bundle)
			done <- err
		}()

		select {
		case <-entered:
		case <-bundle.ctx.Done():
			require.FailNow(t, "call never reached the hook")
		}
		// The call is held: it is counted, not yet passed on, and a fault
		// injected now applies to it.
		require.Equal(t, 1, bundle.store.Calls("TaskInsert"))
		require.Zero(t, bundle.inner.inserts.Load())
		bundle.store.Inject("TaskInsert", After, errInjected, 1)
		close(release)

		select {
		case err := <-done:
			require.ErrorIs(t, err, errInjected)
		case <-bundle.ctx.Done():
			require.FailNow(t, "held call never returned")
		}
		require.Equal(t, int64(1), bundle.inner.inserts.Load())
	})
}

func TestStorePanicsOnMisuse(t *testing.T) {
	t.Parallel()
	s := New(&innerStore{})

	const unknown = `unknown point "TaskFinsh"; points are the store.Store method names in faultstore.Points`
	require.PanicsWithValue(t, "faultstore: Inject: "+unknown, func() { s.Inject("TaskFinsh", Before, errInjected, 1) })
	require.PanicsWithValue(t, "faultstore: Clear: "+unknown, func() { s.Clear("TaskFinsh") })
	require.PanicsWithValue(t, "faultstore: Calls: "+unknown, func() { s.Calls("TaskFinsh") })
	require.PanicsWithValue(t, "faultstore: Hook: "+unknown, func() { s.Hook("TaskFinsh", nil) })
	require.Panics(t, func() { s.Inject("Close", Before, errInjected, 1) }, "Close is not a point")

	require.PanicsWithValue(t, `faultstore: Inject("TaskInsert"): when is When(0), want Before or After`,
		func() { s.Inject("TaskInsert", 0, errInjected, 1) })
	require.PanicsWithValue(t, `faultstore: Inject("TaskInsert"): nil error`,
		func() { s.Inject("TaskInsert", Before, nil, 1) })
}

// TestPointsMatchStoreInterface keeps Points in step with store.Store as
// the interface grows, and checks that each method counts and faults under
// its own name.
func TestPointsMatchStoreInterface(t *testing.T) {
	t.Parallel()

	storeType := reflect.TypeFor[store.Store]()
	var methods []string
	for m := range storeType.Methods() {
		if m.Name != "Close" {
			methods = append(methods, m.Name)
		}
	}
	points := Points[:]
	require.ElementsMatch(t, methods, points)
	require.Len(t, points, len(slices.Compact(slices.Sorted(slices.Values(points)))), "Points has duplicates")

	for _, name := range points {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			bundle := setup(t)
			bundle.store.Inject(name, Before, errInjected, 1)

			method := reflect.ValueOf(bundle.store).MethodByName(name)
			in := []reflect.Value{reflect.ValueOf(bundle.ctx)}
			for i := 1; i < method.Type().NumIn(); i++ {
				in = append(in, reflect.Zero(method.Type().In(i)))
			}
			out := method.Call(in)
			err, _ := out[len(out)-1].Interface().(error)
			require.ErrorIs(t, err, errInjected)
			for _, v := range out[:len(out)-1] {
				require.True(t, v.IsZero(), "%s returned a non-zero result with a Before fault", name)
			}
			for _, other := range points {
				want := 0
				if other == name {
					want = 1
				}
				require.Equal(t, want, bundle.store.Calls(other), "calls at %s", other)
			}
		})
	}
}

func TestStoreConcurrent(t *testing.T) {
	t.Parallel()
	bundle := setup(t)

	const (
		callers = 50
		failing = 10
	)
	bundle.store.Inject("TaskInsert", After, errInjected, failing)

	errs := make(chan error, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			_, err := bundle.store.TaskInsert(bundle.ctx, &store.TaskInsertParams{ID: "t"})
			errs <- err
		})
		// Reconfigure other points while calls are in flight.
		wg.Go(func() {
			bundle.store.Inject("TaskCheckpoint", Before, errInjected, -1)
			bundle.store.Hook("TaskCheckpoint", func(context.Context) error { return nil })
			_ = bundle.store.TaskCheckpoint(bundle.ctx, &store.TaskCheckpointParams{})
			_ = bundle.store.Calls("TaskInsert")
			bundle.store.Clear("TaskCheckpoint")
		})
	}
	wg.Wait()
	close(errs)

	var failed int
	for err := range errs {
		if err != nil {
			require.ErrorIs(t, err, errInjected)
			failed++
		}
	}
	require.Equal(t, failing, failed)
	require.Equal(t, callers, bundle.store.Calls("TaskInsert"))
	require.Equal(t, int64(callers), bundle.inner.inserts.Load(), "After faults still call the inner store")
	require.Equal(t, callers, bundle.store.Calls("TaskCheckpoint"))
}
