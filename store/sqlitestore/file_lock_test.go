package sqlitestore

import (
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// turnOrder queues one write per entry of queued (name and kind), while the
// lock is held by a write of kind holder, and returns the order in which
// they got their turns.
func turnOrder(t *testing.T, holder writeKind, queued ...queuedWrite) string {
	t.Helper()
	l := &fileLock{}
	l.lock(holder)
	var (
		mu    sync.Mutex
		order []string
		wg    sync.WaitGroup
	)
	for i, q := range queued {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.lock(q.kind)
			mu.Lock()
			order = append(order, q.name)
			mu.Unlock()
			l.unlock()
		}()
		// Queue them one at a time, so the order within a kind is known.
		for waiting(l) < i+1 {
			runtime.Gosched()
		}
	}
	l.unlock()
	wg.Wait()
	require.False(t, l.held, "the lock is free once every write has had its turn")
	return strings.Join(order, " ")
}

func waiting(l *fileLock) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, q := range l.queues {
		n += len(q)
	}
	return n
}

type queuedWrite = struct {
	name string
	kind writeKind
}

func TestFileLockTurns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		holder writeKind
		queued []queuedWrite
		want   string
	}{
		{
			name:   "writes of one kind go in order",
			holder: callerWrite,
			queued: []queuedWrite{{"s1", callerWrite}, {"s2", callerWrite}, {"s3", callerWrite}},
			want:   "s1 s2 s3",
		},
		{
			name:   "a caller's write goes after the batch under way, before batches that queued first",
			holder: finishWrite,
			queued: []queuedWrite{{"claim", claimWrite}, {"finish", finishWrite}, {"submit", callerWrite}},
			want:   "submit claim finish",
		},
		{
			name:   "callers and batches take turns, so a stream of writes does not starve the engine",
			holder: callerWrite,
			queued: []queuedWrite{{"s1", callerWrite}, {"s2", callerWrite}, {"s3", callerWrite}, {"finish", finishWrite}, {"claim", claimWrite}},
			want:   "claim s1 finish s2 s3",
		},
		{
			name:   "a claim goes before a finish that queued first",
			holder: claimWrite,
			queued: []queuedWrite{{"finish", finishWrite}, {"claim", claimWrite}},
			want:   "claim finish",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, turnOrder(t, tc.holder, tc.queued...))
		})
	}
}
