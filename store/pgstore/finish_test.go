package pgstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

// A finish reaches its tasks by primary key whatever the statistics say.
// From statistics that count few running tasks, the planner would rather
// hash the batch and read every running task through tasks_lease_expiry,
// which keeps an entry for each task that ever ran until vacuum.
func TestFinishReadsItsTasksByKey(t *testing.T) {
	t.Parallel()
	s := openTest(t, testDSN(t))
	ctx := t.Context()
	for i := range 400 {
		insertTask(t, s, fmt.Sprintf("tsk_%04d", i), "", 0)
	}
	leased, err := s.TaskLeaseMany(ctx, &store.TaskLeaseManyParams{Owner: "w", Limit: 20, TTL: time.Minute})
	require.NoError(t, err)
	require.Len(t, leased, 20)
	_, err = s.pool.Exec(ctx, `ANALYZE tasks`)
	require.NoError(t, err)

	ends := &leaseEnds{}
	for _, task := range leased[:16] {
		ends.add(store.Lease{TaskID: task.ID, Token: task.LeaseToken}, store.StatusCompleted,
			nil, nil, nil, nil, nil, 0, &at0, at0, nil)
	}
	tx, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // nothing is kept
	var plan string
	for _, q := range ends.take() { // as a finish sends them, the UPDATE explained
		if q.SQL != sqlFinish {
			_, err := tx.Exec(ctx, q.SQL, q.Arguments...)
			require.NoError(t, err)
			continue
		}
		require.NoError(t, tx.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+q.SQL, q.Arguments...).Scan(&plan))
	}
	require.Contains(t, plan, `"Index Name": "tasks_pkey"`, plan)
	require.NotContains(t, plan, `Hash Join`, plan)
	require.NotContains(t, plan, `tasks_lease_expiry`, plan)
}
