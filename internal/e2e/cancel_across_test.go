package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/pgtest"
	"github.com/errandhq/errand/store"
)

// TestCancelOnOneDaemonStopsTaskOnAnother runs two errand serve processes
// on one PostgreSQL schema, a task on daemon B whose step blocks, and
// cancels it through daemon A's API: B must stop the step's process and
// end the task cancelled within a second. Leases last a minute and are
// renewed every 20 s, so only the cross-process cancel signal can be that
// fast.
func TestCancelOnOneDaemonStopsTaskOnAnother(t *testing.T) {
	const (
		leaseTTL    = time.Minute
		cancelLimit = time.Second
		startLimit  = time.Minute // start-up on a loaded machine
	)
	dsn := pgtest.DSN(t)
	shared := t.TempDir()
	started := filepath.Join(shared, "started")   // FIFO: the step says it runs
	release := filepath.Join(shared, "release")   // FIFO: the step waits here
	finished := filepath.Join(shared, "finished") // written only if the step goes on
	for _, fifo := range []string{started, release} {
		require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	}
	// Builtins only, so the step is one process: the leader of its group.
	script := filepath.Join(shared, "block.sh")
	writeFile(t, script, `#!/bin/sh
echo "$$ $PPID" > "$STARTED"
read -r line < "$RELEASE"
echo finished > "$FINISHED"
printf '{"status":"finish","output":"released"}\n'
`, 0o755)

	// Each daemon has only its own agent and claims only its tasks.
	serve := func(agent string) *daemon {
		home := t.TempDir()
		writeFile(t, filepath.Join(home, "errand.yaml"), fmt.Sprintf(`
store: %q
workers: 1
lease_ttl: %s
agents:
  %s:
    kind: exec
    command: [%q]
    env: {STARTED: %q, RELEASE: %q, FINISHED: %q}
`, dsn, leaseTTL, agent, script, started, release, finished), 0o600)
		return startDaemon(t, home)
	}
	a, b := serve("elsewhere"), serve("blocker")

	var task api.Task
	require.Equal(t, http.StatusCreated, b.api("POST", "/api/tasks", map[string]any{"goal": "block until cancelled", "agent": "blocker"}, &task))

	line := readFIFO(t, started, startLimit)
	var pgid, parent int
	_, err := fmt.Sscan(line, &pgid, &parent)
	require.NoError(t, err, "started marker %q", line)
	require.Equal(t, b.cmd.Process.Pid, parent, "the step runs under daemon B")
	require.NoError(t, syscall.Kill(-pgid, 0), "the step's process group runs")

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events := b.stream(ctx, "/api/tasks/"+task.ID+"/events", 0)

	var requested api.Task
	require.Equal(t, http.StatusOK, a.api("DELETE", "/api/tasks/"+task.ID, api.CancelTask{Reason: "cancelled through A"}, &requested))
	sent := time.Now()
	require.Equal(t, store.StatusRunning, requested.Status, "the task was still running when A took the cancel")

	deadline := time.After(cancelLimit)
	for cancelled := false; !cancelled; {
		select {
		case ev, ok := <-events:
			require.True(t, ok, "daemon B's event stream ended")
			cancelled = ev.Type == "task.cancelled"
		case <-deadline:
			var now api.Task
			a.api("GET", "/api/tasks/"+task.ID, nil, &now)
			t.Fatalf("task %s not cancelled on daemon B within %s of the cancel sent to daemon A; status %s", task.ID, cancelLimit, now.Status)
		}
	}
	t.Logf("cancelled on daemon B %s after the cancel to daemon A returned", time.Since(sent))

	// B writes the cancel once the step's command returned: its process
	// group is gone, nothing waits for the release, and it never finished.
	require.ErrorIs(t, syscall.Kill(-pgid, 0), syscall.ESRCH, "the step's process group outlived the cancel")
	probe, err := os.OpenFile(release, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err == nil {
		probe.Close()
	}
	require.ErrorIs(t, err, syscall.ENXIO, "something still waits on the step's release")
	require.NoFileExists(t, finished)

	var final api.Task
	require.Equal(t, http.StatusOK, a.api("GET", "/api/tasks/"+task.ID, nil, &final))
	require.Equal(t, store.StatusCancelled, final.Status)
	require.NotNil(t, final.Error)
	require.Equal(t, "cancelled", final.Error.Code)

	cancel()
	a.stop()
	b.stop()
}

// readFIFO reads one line from a FIFO once a writer opens it, failing the
// test if none does within limit.
func readFIFO(t *testing.T, path string, limit time.Duration) string {
	t.Helper()
	type read struct {
		b   []byte
		err error
	}
	got := make(chan read, 1)
	go func() {
		b, err := os.ReadFile(path) // blocks in open until a writer comes
		got <- read{b, err}
	}()
	select {
	case r := <-got:
		require.NoError(t, r.err)
		return strings.TrimSpace(string(r.b))
	case <-time.After(limit):
		// Stand in as the writer so the reader's open returns.
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		<-got
		t.Fatalf("nothing wrote %s within %s", path, limit)
		return ""
	}
}
