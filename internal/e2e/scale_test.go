package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/pgtest"
)

// TestThreeDaemonsOnePostgres runs three errand serve processes on one
// PostgreSQL database, submits 5,000 two-step tasks through all three,
// kills one with SIGKILL halfway, and checks that every task completes,
// that no step errand had recorded as done ran again (only those in
// flight at the kill may), and that the killed process's tasks ran again
// on the others within the lease TTL and a second.
func TestThreeDaemonsOnePostgres(t *testing.T) {
	const (
		tasks, workers = 5000, 4
		leaseTTL       = 3 * time.Second
	)
	dsn := pgtest.DSN(t)
	shared := t.TempDir()
	stepLog := filepath.Join(shared, "steps.log")
	// Builtins only, so a step costs one sh and no more processes.
	writeFile(t, filepath.Join(shared, "steps.sh"), `#!/bin/sh
IFS= read -r input
rest=${input#*\"idempotency_key\":\"}
key=${rest%%\"*}
# A child of the killed daemon can wake to a closed stdin before its
# parent-death signal lands: it received no step, so it logs none.
[ -n "$key" ] || exit 1
echo "$key" >> "$STEP_LOG"
case $input in
*'"step":{"number":1'*) printf '{"status":"continue","output":{"step":1}}\n' ;;
*) printf '{"status":"finish","output":"two steps"}\n' ;;
esac
`, 0o755)
	daemons := make([]*daemon, 3)
	for i := range daemons {
		home := t.TempDir()
		writeFile(t, filepath.Join(home, "errand.yaml"), fmt.Sprintf(`
store: %q
workers: %d
lease_ttl: %s
heartbeat_interval: 1s
agents:
  default: {kind: exec, command: [%q], env: {STEP_LOG: %q}}
`, dsn, workers, leaseTTL, filepath.Join(shared, "steps.sh"), stepLog), 0o600)
		daemons[i] = startDaemon(t, home)
	}
	a, victim, c := daemons[0], daemons[1], daemons[2]
	victimPID := strconv.Itoa(victim.cmd.Process.Pid)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events := a.stream(ctx, "/api/events?after=0", 0)

	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for i := g; i < tasks; i += 6 {
				var task api.Task
				code := daemons[i%3].api("POST", "/api/tasks", map[string]any{"goal": fmt.Sprintf("two steps %d", i)}, &task)
				if code != http.StatusCreated {
					t.Errorf("submit %d through daemon %d: %d", i, i%3, code)
					return
				}
			}
		})
	}

	var (
		owner     = map[string]string{} // the owner of each task's last claim
		ended     = map[string]string{} // how each task ended
		killedAt  time.Time
		orphans   = map[string]bool{} // the victim's tasks at the kill
		resumedAt = map[string]time.Time{}
	)
	timeout := time.After(10 * time.Minute)
	for len(ended) < tasks {
		var ev sse
		select {
		case ev = <-events:
		case <-timeout:
			t.Fatalf("%d of %d tasks ended", len(ended), tasks)
		}
		switch ev.Type {
		case "task.started":
			var d struct {
				Owner string `json:"owner"`
			}
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			owner[ev.TaskID] = d.Owner
			if orphans[ev.TaskID] && resumedAt[ev.TaskID].IsZero() {
				resumedAt[ev.TaskID] = ev.CreatedAt
			}
		case "task.completed", "task.failed", "task.cancelled":
			ended[ev.TaskID] = ev.Type
		}
		if killedAt.IsZero() && len(ended) >= tasks/2 {
			victim.kill9()
			killedAt = time.Now()
			// Every claim the victim made is in the journal by now: it
			// is dead, and a claim's event commits with it.
			for id, o := range owner {
				if _, done := ended[id]; !done && ownedBy(o, victimPID) {
					orphans[id] = true
				}
			}
		}
	}
	wg.Wait()
	cancel()

	for id, how := range ended {
		require.Equal(t, "task.completed", how, "task %s", id)
	}
	require.NotEmpty(t, orphans, "the victim was running tasks when it died")
	// A task the victim was running as far as the stream had read at the
	// kill either ran again elsewhere, within the lease TTL and a second,
	// or had its finish committed by the victim just before it died (the
	// stream had not reached that event yet): it then ended with no
	// claim after the kill, which every task ending (checked above)
	// rules out for a lost lease.
	resumed := 0
	for id := range orphans {
		at := resumedAt[id]
		if at.IsZero() {
			continue
		}
		resumed++
		require.LessOrEqual(t, at.Sub(killedAt), leaseTTL+time.Second, "task %s ran again %s after the kill", id, at.Sub(killedAt))
	}
	require.Positive(t, resumed, "no task of the victim's ran again (of %d it was running)", len(orphans))

	data, err := os.ReadFile(stepLog)
	require.NoError(t, err)
	runs := map[string]int{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		runs[line]++
	}
	require.Len(t, runs, tasks*2)
	repeats := 0
	for key, n := range runs {
		require.LessOrEqual(t, n, 2, "step %s ran %d times", key, n)
		repeats += n - 1
	}
	require.LessOrEqual(t, repeats, workers, "only the killed daemon's steps in flight may run again")

	a.stop()
	c.stop()
}

// ownedBy reports whether a lease owner (host:pid:boot) is the process pid.
func ownedBy(owner, pid string) bool {
	parts := strings.Split(owner, ":")
	return len(parts) >= 3 && parts[len(parts)-2] == pid
}
