package bench

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The fairness bench runs end to end on a small backlog: key B's tasks all
// start while key A's backlog still stands, so each was claimed ahead of
// it.
func TestFairness(t *testing.T) {
	t.Parallel()
	report, err := Fairness(t.Context(), FairnessOptions{Backlog: 5000, Samples: 10, Workers: 4, Dir: t.TempDir()})
	require.NoError(t, err)
	require.Equal(t, "sqlite", report.Store)
	require.Equal(t, 10, report.Samples)
	require.Positive(t, report.BacklogLeft, "A's backlog stood while B's tasks started")
	require.Positive(t, report.IdleP99MS)
	require.Positive(t, report.BacklogP99MS)
	require.GreaterOrEqual(t, report.BacklogP99MS, report.BacklogP50MS)
}

func TestFairnessRefusesNonsense(t *testing.T) {
	t.Parallel()
	_, err := Fairness(t.Context(), FairnessOptions{Backlog: -1})
	require.Error(t, err)
	_, err = Fairness(t.Context(), FairnessOptions{Work: -1})
	require.Error(t, err)
}
