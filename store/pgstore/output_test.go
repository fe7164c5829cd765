package pgstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

// listenOutputTest starts s listening for live output and returns what it
// hears ("" each time it starts listening); it returns once it listens.
func listenOutputTest(t *testing.T, s *Store) <-chan string {
	t.Helper()
	heard := make(chan string, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.ListenOutput(ctx, func(p string) { heard <- p })
	}()
	t.Cleanup(func() { cancel(); <-done })
	require.Empty(t, waitPayload(t, heard), "it says when it starts listening")
	return heard
}

func waitPayload(t *testing.T, heard <-chan string) string {
	t.Helper()
	select {
	case p := <-heard:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("nothing heard")
		return ""
	}
}

// Output payloads reach every process on the schema, the sender too, in
// order.
func TestOutputReachesOtherProcesses(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	a, b := openTest(t, dsn), openTest(t, dsn)
	atB := listenOutputTest(t, b)
	atA := listenOutputTest(t, a)

	big := strings.Repeat("é", store.MaxOutputPayload/2)
	for _, p := range []string{"one", "two", big} {
		require.NoError(t, a.RelayOutput(t.Context(), p))
	}
	for _, heard := range []<-chan string{atB, atA} {
		require.Equal(t, "one", waitPayload(t, heard))
		require.Equal(t, "two", waitPayload(t, heard))
		require.Equal(t, big, waitPayload(t, heard))
	}
}

func TestOutputPayloadMustBeShortText(t *testing.T) {
	t.Parallel()
	s := openTest(t, testDSN(t))
	for _, bad := range []string{"", strings.Repeat("x", store.MaxOutputPayload+1), "\xff", "a\x00b"} {
		require.Error(t, s.RelayOutput(t.Context(), bad), "%q", bad)
	}
}

// An output listener whose connection is cut listens again and says so,
// so its user asks again for what it may have missed.
func TestOutputListenerReconnects(t *testing.T) {
	t.Parallel()
	s := openTest(t, testDSN(t))
	heard := listenOutputTest(t, s)

	var n int
	require.NoError(t, s.pool.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE query = $1`, `LISTEN "`+outputChannel(s.channel)+`"`).Scan(&n))
	require.Equal(t, 1, n)
	require.Empty(t, waitPayload(t, heard))
	require.NoError(t, s.RelayOutput(t.Context(), "after"))
	require.Equal(t, "after", waitPayload(t, heard))
}

func TestOutputChannelFitsAnIdentifier(t *testing.T) {
	t.Parallel()
	require.Equal(t, "errand/output", outputChannel(signalChannel("public")))
	long := outputChannel(signalChannel(strings.Repeat("s", 80)))
	require.Len(t, long, 63)
	require.NotEqual(t, signalChannel(strings.Repeat("s", 80)), long)
}
