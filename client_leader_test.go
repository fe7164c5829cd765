package errand

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := openTest(t, nil)

	before := time.Now()
	l, err := c.Lead(ctx, "webhook:0", "a", time.Minute)
	require.NoError(t, err)
	require.Equal(t, "a", l.Owner)
	require.False(t, l.ExpiresAt.Before(before.Add(time.Minute).Truncate(time.Microsecond)))

	l, err = c.Lead(ctx, "webhook:0", "b", time.Minute)
	require.NoError(t, err)
	require.Equal(t, "a", l.Owner, "held by another owner")

	require.NoError(t, c.Unlead(ctx, "webhook:0", "b"), "not b's to release")
	l, err = c.Lead(ctx, "webhook:0", "b", time.Minute)
	require.NoError(t, err)
	require.Equal(t, "a", l.Owner)

	require.NoError(t, c.Unlead(ctx, "webhook:0", "a"))
	l, err = c.Lead(ctx, "webhook:0", "b", time.Minute)
	require.NoError(t, err)
	require.Equal(t, "b", l.Owner, "free once released")

	_, err = c.Lead(ctx, "", "a", time.Minute)
	require.ErrorIs(t, err, ErrInvalid)
	_, err = c.Lead(ctx, "x", "", time.Minute)
	require.ErrorIs(t, err, ErrInvalid)
	_, err = c.Lead(ctx, "x", "a", 0)
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorIs(t, c.Unlead(ctx, "", "a"), ErrInvalid)
}
