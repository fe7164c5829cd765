package sqlitestore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

// TestDiskFull fills the store as a full disk would, by capping the file
// at the pages it has (SQLite answers SQLITE_FULL for both): a write
// fails with store.ErrDiskFull naming the file, what was written before
// is still read, and writing works again once there is room.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	ctx := t.Context()
	insert := func(id string) error {
		_, err := s.TaskInsert(ctx, &store.TaskInsertParams{
			ID: id, Goal: strings.Repeat("a goal that takes room ", 400), Agent: "a", MaxAttempts: 1,
		})
		return err
	}
	require.NoError(t, insert("tsk_before"))

	var pages int
	require.NoError(t, s.writer.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages))
	_, err := s.writer.ExecContext(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, pages))
	require.NoError(t, err)
	var full error
	for i := 0; full == nil; i++ {
		require.Less(t, i, 100, "the capped file never filled")
		full = insert(fmt.Sprintf("tsk_full_%d", i))
	}
	require.ErrorIs(t, full, store.ErrDiskFull)
	var df *store.DiskFullError
	require.ErrorAs(t, full, &df)
	require.Equal(t, absPath(s.path), df.Where)
	require.Contains(t, full.Error(), "disk full: "+df.Where+": ")
	require.True(t, strings.HasPrefix(df.Where, "/"), "the file is named by its absolute path: %s", df.Where)
	require.True(t, s.diskFull.Load())

	task, err := s.TaskGetByID(ctx, "tsk_before")
	require.NoError(t, err, "reads go on")
	require.Equal(t, "tsk_before", task.ID)

	_, err = s.writer.ExecContext(ctx, `PRAGMA max_page_count = 1073741823`)
	require.NoError(t, err)
	require.NoError(t, insert("tsk_after"))
	require.NoError(t, s.CheckWritable(ctx))
	require.False(t, s.diskFull.Load(), "a write that took room clears it")
}

func TestClassifyWriteLeavesOtherErrors(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	err := fmt.Errorf("insert: %w", store.ErrNotFound)
	require.Same(t, err, s.classifyWrite(err))
	require.False(t, s.diskFull.Load())
}
