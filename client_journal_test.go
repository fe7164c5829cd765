package errand

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func TestCursors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := openTest(t, nil)

	last, err := c.LastEventID(ctx)
	require.NoError(t, err)
	require.Zero(t, last, "an empty journal")

	id, found, err := c.Cursor(ctx, "webhook:0")
	require.NoError(t, err)
	require.False(t, found)
	require.Zero(t, id)

	task, err := c.Submit(ctx, &SubmitParams{Goal: "g"})
	require.NoError(t, err)
	last, err = c.LastEventID(ctx)
	require.NoError(t, err)
	history, err := c.History(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, history[len(history)-1].ID, last)

	require.NoError(t, c.SetCursor(ctx, "webhook:0", last))
	id, found, err = c.Cursor(ctx, "webhook:0")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, last, id)
	require.NoError(t, c.SetCursor(ctx, "webhook:0", 0), "a cursor may be moved back")
	id, _, err = c.Cursor(ctx, "webhook:0")
	require.NoError(t, err)
	require.Zero(t, id)

	_, _, err = c.Cursor(ctx, "")
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorIs(t, c.SetCursor(ctx, "", 1), ErrInvalid)
	require.ErrorIs(t, c.SetCursor(ctx, "x", -1), ErrInvalid)
}

func TestSpendSince(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := openTest(t, nil)
	day := time.Date(2100, 3, 4, 0, 0, 0, 0, time.UTC) // step times are pinned; the claim is not

	spend, err := c.SpendSince(ctx, time.Time{})
	require.NoError(t, err)
	require.Zero(t, spend)

	for i, cost := range []float64{0.5, 0.25, 0.125} {
		task, err := c.Submit(ctx, &SubmitParams{Goal: "g", Agent: fmt.Sprint("agent-", i)})
		require.NoError(t, err)
		run := storeRun(t, c, task)
		lease := store.Lease{TaskID: run.ID, Token: run.LeaseToken}
		started := day.Add(time.Duration(i) * 12 * time.Hour) // yesterday-ish, today, tomorrow
		_, err = c.store.StepStart(ctx, &store.StepStartParams{Lease: lease, StepNo: 1, Type: store.StepLLMCall,
			IdempotencyKey: task.ID + ":1", Now: &started})
		require.NoError(t, err)
		_, err = c.store.StepFinish(ctx, &store.StepFinishParams{Lease: lease, IdempotencyKey: task.ID + ":1",
			Status: store.StepDone, Output: json.RawMessage(`{}`), CostUSD: cost, Now: &started})
		require.NoError(t, err)
	}
	for _, tc := range []struct {
		since time.Time
		want  float64
	}{
		{time.Time{}, 0.875},
		{day, 0.875},
		{day.Add(time.Nanosecond), 0.375},
		{day.Add(12 * time.Hour), 0.375},
		{day.Add(24 * time.Hour), 0.125},
		{day.Add(48 * time.Hour), 0},
	} {
		got, err := c.SpendSince(ctx, tc.since)
		require.NoError(t, err)
		require.InDelta(t, tc.want, got, 1e-9, "since %s", tc.since)
	}
}
