package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/store"
)

// diskFullSize is the tmpfs the store lives on, filled in a moment. The
// filler the test frees must leave room for a checkpoint to copy the WAL
// into the database file, which then grows by as much: with too little,
// the disk is as full as before.
const diskFullSize = "32m"

// mountSmallDisk mounts a tmpfs of diskFullSize for this test and
// unmounts it when the test ends. It needs root; anyone else, or a
// machine that refuses the mount, skips the test, saying why.
func mountSmallDisk(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: the disk-full test mounts a small tmpfs to fill, which needs root; run it as root (CI does)")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+diskFullSize+",mode=0700"); err != nil {
		t.Skipf("skipped: mount a %s tmpfs at %s: %v (a container without CAP_SYS_ADMIN refuses it)", diskFullSize, dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			// Something still holds a file open: detach, so it goes
			// once that lets go, and say so.
			t.Errorf("unmount %s: %v", dir, err)
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return dir
}

// fillDisk writes path until the disk it is on has no room left.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	require.NoError(t, err)
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for size := len(chunk); size > 0; {
		if _, err := f.Write(chunk[:size]); err != nil {
			require.ErrorIs(t, err, syscall.ENOSPC)
			size /= 2 // fill what a smaller write still finds
		}
	}
}

// TestDiskFull runs errand serve over a store on a small disk and fills
// that disk: a submit then fails with a 507 that says the disk is full
// and names the store's file, and so do the daemon's own writes in its
// log; the daemon stays up and every task and step written before is
// still read. Once space is freed, without a restart, submits succeed
// again and every task accepted completes.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	disk := mountSmallDisk(t)
	db := filepath.Join(disk, "errand.db")
	home := t.TempDir()
	gate := filepath.Join(home, "gate")
	// A task whose goal says hold waits in its first step for the gate, so
	// that its writes come while the disk is full.
	writeFile(t, filepath.Join(home, "step.sh"), `#!/bin/sh
input=$(cat)
step=$(printf '%s\n' "$input" | sed -n 's/.*"step":{"number":\([0-9][0-9]*\).*/\1/p')
case "$input" in *'"goal":"hold'*)
	while [ ! -e "$GATE" ]; do sleep 0.02; done
esac
if [ "$step" -ge 2 ]; then
	printf '{"status":"finish","output":"done in 2 steps"}\n'
else
	printf '{"status":"continue","output":{"step":%s}}\n' "$step"
fi
`, 0o755)
	writeFile(t, filepath.Join(home, "errand.yaml"), fmt.Sprintf(`
store: %q
workers: 2
lease_ttl: 2s
heartbeat_interval: 1s
agents:
  default: {kind: exec, command: ["./step.sh"], env: {GATE: %q}}
`, "sqlite://"+db, gate), 0o600)
	d := startDaemon(t, home)

	// Large inputs fill the disk in few submits; random text, as SQLite
	// stores what it is given as it is.
	rnd := rand.New(rand.NewPCG(29, 1))
	submitGoal := func(goal string) (int, api.Task, api.ErrorBody) {
		blob := make([]byte, 128<<10)
		for j := range blob {
			blob[j] = byte('a' + rnd.IntN(26))
		}
		status, body := d.call("POST", "/api/tasks", map[string]any{
			"goal": goal, "input": map[string]any{"blob": string(blob)},
		})
		var task api.Task
		var fail api.ErrorBody
		if status == http.StatusCreated {
			require.NoError(t, json.Unmarshal(body, &task), string(body))
		} else {
			require.NoError(t, json.Unmarshal(body, &fail), string(body))
		}
		return status, task, fail
	}
	submit := func(i int) (int, api.Task, api.ErrorBody) { return submitGoal(fmt.Sprintf("task %d", i)) }
	waitCompleted := func(ids []string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for _, id := range ids {
			for {
				var task api.Task
				require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks/"+id, nil, &task))
				if task.Status == store.StatusCompleted {
					break
				}
				require.False(t, task.Status.Terminal(), "task %s ended %s, not completed", id, task.Status)
				require.True(t, time.Now().Before(deadline), "task %s is still %s:\n%s", id, task.Status, d.log())
				<-time.After(50 * time.Millisecond)
			}
		}
	}

	// Tasks done before the disk fills, with their steps.
	var accepted []string
	for i := range 3 {
		status, task, fail := submit(i)
		require.Equal(t, http.StatusCreated, status, fail.Error.Message)
		accepted = append(accepted, task.ID)
	}
	waitCompleted(accepted)
	stepsBefore := map[string]api.StepList{}
	for _, id := range accepted {
		var steps api.StepList
		require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks/"+id+"/steps", nil, &steps))
		require.Len(t, steps.Steps, 2)
		stepsBefore[id] = steps
	}

	// Two tasks hold both workers, mid-step, while the disk fills: the
	// tasks accepted then wait, pending.
	for i := range 2 {
		status, task, fail := submitGoal(fmt.Sprintf("hold %d", i))
		require.Equal(t, http.StatusCreated, status, fail.Error.Message)
		accepted = append(accepted, task.ID)
		waitStatus(t, d, task.ID, store.StatusRunning)
	}

	filler := filepath.Join(disk, "filler")
	fillDisk(t, filler)
	var fail api.ErrorBody
	for i := 3; ; i++ {
		require.Less(t, i, 200, "the disk never filled up")
		var (
			status int
			task   api.Task
		)
		status, task, fail = submit(i)
		if status == http.StatusCreated {
			accepted = append(accepted, task.ID)
			continue
		}
		require.Equal(t, http.StatusInsufficientStorage, status, fail.Error.Message)
		break
	}
	require.Equal(t, "disk_full", fail.Error.Code)
	require.Contains(t, fail.Error.Message, "disk full: "+db+": ", "the message names the store's file")
	require.Contains(t, fail.Error.Message, "free space")

	// Full: the daemon is up and serves reads.
	select {
	case <-d.exited:
		t.Fatalf("errand serve exited on a full disk:\n%s", d.log())
	default:
	}
	// The held tasks' own writes find the disk full too, and the daemon
	// says so, naming the file.
	writeFile(t, gate, "", 0o600)
	waitEngineDiskFull(t, d, db)
	// /healthz answers; it says 503 only while not even a one-page write
	// commits, and a WAL with room left may still take one.
	if status, health := getHealth(t, d); status != http.StatusOK {
		require.Equal(t, http.StatusServiceUnavailable, status)
		require.Contains(t, health["error"], "disk full: "+db)
	}

	// Two lease TTLs on the full disk: renewals fail, leases lapse and
	// recovery runs into the full disk too. Reads are served all along,
	// and no loop spins on the error: each tries again at its interval.
	for until := time.Now().Add(4 * time.Second); time.Now().Before(until); {
		var task api.Task
		require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks/"+accepted[0], nil, &task))
		require.Equal(t, store.StatusCompleted, task.Status)
		status, _ := getHealth(t, d)
		require.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable}, status)
	}
	require.Less(t, strings.Count(d.log(), "disk full: "+db), 100, "a loop retries a full disk without pause:\n%s", d.log())

	var list api.TaskList
	require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks?limit=1000", nil, &list))
	listed := map[string]bool{}
	for _, task := range list.Tasks {
		listed[task.ID] = true
	}
	for _, id := range accepted {
		require.True(t, listed[id], "task %s is listed", id)
		var task api.Task
		require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks/"+id, nil, &task))
	}
	for id, before := range stepsBefore {
		var steps api.StepList
		require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks/"+id+"/steps", nil, &steps))
		require.Equal(t, before, steps, "task %s keeps its steps", id)
	}

	// Room again: work resumes in the same process.
	require.NoError(t, os.Remove(filler))
	status, task, fail := submit(1000)
	require.Equal(t, http.StatusCreated, status, fail.Error.Message)
	accepted = append(accepted, task.ID)
	waitCompleted(accepted)
	waitHealth(t, d, http.StatusOK)
	for id, before := range stepsBefore {
		var steps api.StepList
		require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks/"+id+"/steps", nil, &steps))
		require.Equal(t, before, steps, "task %s keeps its steps", id)
	}
	d.stop()

	// The file passes the integrity check of the next start, with every
	// task in it.
	d = startDaemon(t, home)
	for _, id := range accepted {
		var task api.Task
		require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks/"+id, nil, &task))
		require.Equal(t, store.StatusCompleted, task.Status)
	}
	d.stop()
}

// waitStatus polls a task until it has status.
func waitStatus(t *testing.T, d *daemon, id string, status store.Status) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var task api.Task
		require.Equal(t, http.StatusOK, d.api("GET", "/api/tasks/"+id, nil, &task))
		if task.Status == status {
			return
		}
		require.True(t, time.Now().Before(deadline), "task %s is %s, not %s", id, task.Status, status)
		<-time.After(20 * time.Millisecond)
	}
}

// waitEngineDiskFull waits until the daemon logs a write of its own, not a
// request's, that found the disk full and named the file db.
func waitEngineDiskFull(t *testing.T, d *daemon, db string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		log, next := d.logUntilLine()
		for line := range strings.SplitSeq(log, "\n") {
			if strings.Contains(line, "disk full: "+db+": ") && !strings.Contains(line, "request failed") {
				return
			}
		}
		select {
		case <-next:
		case <-deadline:
			require.FailNow(t, "not logged", "no write of the engine logged that the disk is full:\n%s", log)
		}
	}
}

// getHealth asks /healthz and returns its status and body.
func getHealth(t *testing.T, d *daemon) (int, map[string]string) {
	t.Helper()
	res, err := http.Get(d.url + "/healthz")
	require.NoError(t, err)
	defer res.Body.Close()
	var body map[string]string
	require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
	return res.StatusCode, body
}

// waitHealth polls /healthz until it answers status.
func waitHealth(t *testing.T, d *daemon, status int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, body := getHealth(t, d)
		if got == status {
			return
		}
		if time.Now().After(deadline) {
			require.FailNow(t, "healthz", "/healthz answers %d %v, not %d", got, body, status)
		}
		<-time.After(50 * time.Millisecond)
	}
}
