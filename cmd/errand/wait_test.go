package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
)

// waitJournal checks cond each time c's journal grows, until it holds. It
// suits a condition on state that changes only with a journaled write:
// the subscription replays the whole journal, so no write after a check
// goes unnoticed.
func waitJournal(t *testing.T, c *errand.Client, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sub, err := c.Subscribe(ctx, errand.EventFilter{}, 0)
	require.NoError(t, err)
	defer sub.Close()
	for !cond() {
		_, delivered := <-sub.Events()
		require.True(t, delivered, "%s: not within 30s: %v", what, sub.Err())
	}
}
