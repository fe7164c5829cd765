package errand_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
)

// Submits with one debounce key return one task, holding the last
// submit's content; a bad key is a ValidationError naming debounce.key.
func TestSubmitDebounce(t *testing.T) {
	ctx := context.Background()
	c, err := errand.Open(ctx, filepath.Join(t.TempDir(), "a.db"), nil)
	require.NoError(t, err)
	defer c.Close()

	d := &errand.Debounce{Key: "digest", Period: time.Minute}
	first, err := c.SubmitResult(ctx, &errand.SubmitParams{Goal: "first", Debounce: d})
	require.NoError(t, err)
	require.False(t, first.Debounced)
	require.False(t, first.Duplicate)
	last, err := c.SubmitResult(ctx, &errand.SubmitParams{Goal: "last", Debounce: d})
	require.NoError(t, err)
	require.True(t, last.Debounced)
	require.False(t, last.Duplicate)
	require.Equal(t, first.Task.ID, last.Task.ID)
	require.Equal(t, "last", last.Task.Goal)
	require.Equal(t, "digest", last.Task.DebounceKey)

	_, err = c.Submit(ctx, &errand.SubmitParams{Goal: "g", Debounce: &errand.Debounce{Key: "a\x00b", Period: time.Minute}})
	var v *errand.ValidationError
	require.ErrorAs(t, err, &v)
	require.Equal(t, "debounce.key", v.Field)
}
