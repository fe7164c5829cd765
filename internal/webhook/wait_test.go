package webhook

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// waitCursor waits until the cursor name holds id, looking again at each
// cursor write the journal reports.
func (j *fakeJournal) waitCursor(t *testing.T, name string, id int64, msg string) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		got, ok, err := j.Cursor(context.Background(), name)
		require.NoError(t, err)
		if ok && got == id {
			return
		}
		select {
		case <-j.written:
		case <-deadline:
			require.FailNow(t, msg, "cursor %s is %d, not %d, after %s", name, got, id, waitTimeout)
		}
	}
}

// waitForTimer waits until the function named name has a timer armed on
// the bundle's clock (see clock.Fake.WaitForTimer).
func (b *testBundle) waitForTimer(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, b.clock.WaitForTimer(ctx, name))
}
