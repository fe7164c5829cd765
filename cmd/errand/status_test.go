package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/heartbeat"
)

// gonePID is a pid no process has: above any pid_max.
const gonePID = 1 << 30

// statusHome is an ERRAND_HOME holding beat (none if nil) and a token.
func statusHome(t *testing.T, beat *heartbeat.Beat, token string) string {
	t.Helper()
	home := t.TempDir()
	if beat != nil {
		require.NoError(t, heartbeat.Write(filepath.Join(home, heartbeat.FileName), beat))
	}
	if token != "" {
		require.NoError(t, os.WriteFile(filepath.Join(home, "token"), []byte(token), 0o600))
	}
	return home
}

func beatAt(pid int, age time.Duration, listen string) *heartbeat.Beat {
	return &heartbeat.Beat{
		PID: pid, StartedAt: now.Add(-time.Hour), Timestamp: now.Add(-age), Uptime: "59m50s",
		IntervalSeconds: 30, Listen: listen, Tasks: map[string]int{"pending": 4, "running": 1},
	}
}

func TestStatusAlive(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.reply("GET /api/status", 200, api.Status{State: "alive", PID: os.Getpid(), Uptime: "1h0m5s",
		Tasks: map[string]int{"running": 2, "pending": 1, "completed": 7, "failed": 0}, SpendTodayUSD: 0.42, Version: "v1.2.3"})
	listen := strings.TrimPrefix(f.srv.URL, "http://")
	home := statusHome(t, beatAt(os.Getpid(), 10*time.Second, listen), f.token)
	e := testEnv(map[string]string{"ERRAND_HOME": home})

	r := cli(t, e, "status", "--json")
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, 0, r.code)
	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Equal(t, "alive", st["state"])
	require.EqualValues(t, os.Getpid(), st["pid"])
	require.Equal(t, "1h0m5s", st["uptime"])
	require.Equal(t, map[string]any{"running": 2.0, "pending": 1.0, "completed": 7.0, "failed": 0.0}, st["tasks"])
	require.InDelta(t, 0.42, st["spend_today_usd"], 1e-9)
	require.Equal(t, "daemon", st["counts_source"], "current counts")
	require.NotContains(t, st, "counts_as_of")
	require.Equal(t, "v1.2.3", st["version"])
	require.Len(t, f.requests("/api/status"), 1, "asks the daemon at the heartbeat's address")

	r = cli(t, e, "status")
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, "daemon  alive (pid "+strconv.Itoa(os.Getpid())+", up 1h0m5s, listening on "+listen+")\n"+
		"tasks   running 2, pending 1, completed 7\n"+
		"spend   $0.42 today\n", r.stdout)
	require.Empty(t, r.stderr)
}

func TestStatusAliveAPIFails(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	listen := strings.TrimPrefix(f.srv.URL, "http://")
	// The token file is wrong: /api/status answers 401.
	home := statusHome(t, beatAt(os.Getpid(), 10*time.Second, listen), "wrong")

	r := cli(t, testEnv(map[string]string{"ERRAND_HOME": home}), "status", "--json")
	require.Equal(t, 0, r.code, "the daemon is alive all the same")
	var st api.Status
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Equal(t, "alive", st.State)
	require.Equal(t, map[string]int{"pending": 4, "running": 1}, st.Tasks, "the heartbeat's counts")
	require.Equal(t, "1h0m0s", st.Uptime, "from the heartbeat's start")
	require.Equal(t, "heartbeat", st.CountsSource)
	require.NotNil(t, st.CountsAsOf)
	require.Contains(t, r.stderr, "errand: warning: ")
	require.Contains(t, r.stderr, "HTTP 401")
	require.Contains(t, r.stderr, "showing the heartbeat's counts")
}

func TestStatusStaleAndDead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		beat  *heartbeat.Beat
		state string
		code  int
		text  string
	}{
		{"Stale", beatAt(os.Getpid(), 5*time.Minute, ""), "stale", exitStale,
			"daemon  stale (pid " + strconv.Itoa(os.Getpid()) + " runs, but its last heartbeat was 5m ago: is it hung?)\ntasks   running 1, pending 4 (as of 5m ago, when the daemon last wrote its heartbeat)\n"},
		{"Crashed", beatAt(gonePID, 10*time.Second, ""), "dead", exitDead,
			"daemon  dead (pid " + strconv.Itoa(gonePID) + " is gone, last heartbeat 10s ago: it crashed or was killed)\ntasks   running 1, pending 4 (as of 10s ago, when the daemon last wrote its heartbeat)\n"},
		{"NoHeartbeat", nil, "dead", exitDead, "daemon  dead (no heartbeat at "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// No server is reachable: status must not need one.
			home := statusHome(t, tc.beat, "")
			e := testEnv(map[string]string{"ERRAND_HOME": home, "ERRAND_SERVER": "http://127.0.0.1:1"})

			r := cli(t, e, "status")
			require.Equal(t, tc.code, r.code)
			require.True(t, strings.HasPrefix(r.stdout, tc.text), r.stdout)
			require.Empty(t, r.stderr)

			r = cli(t, e, "--json", "status")
			require.Equal(t, tc.code, r.code)
			var st api.Status
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
			require.Equal(t, tc.state, st.State)
			require.NotNil(t, st.Tasks)
			if tc.beat != nil {
				require.Equal(t, tc.beat.PID, st.PID)
				require.Equal(t, tc.beat.Tasks, st.Tasks)
				require.Equal(t, "59m50s", st.Uptime)
				// The counts are the last beat's, and say so.
				require.Equal(t, "heartbeat", st.CountsSource)
				require.NotNil(t, st.CountsAsOf)
				require.True(t, tc.beat.Timestamp.Equal(*st.CountsAsOf))
				require.Contains(t, r.stdout, `"counts_source": "heartbeat"`)
				require.Contains(t, r.stdout, `"counts_as_of": "`)
			} else {
				require.Empty(t, st.CountsSource)
			}
		})
	}
}

func TestStatusUnreadableHeartbeat(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(home, heartbeat.FileName), []byte("{"), 0o644))
	r := cli(t, testEnv(map[string]string{"ERRAND_HOME": home}), "status")
	require.Equal(t, exitDead, r.code)
	require.Contains(t, r.stderr, "errand: warning: read heartbeat")
}

func TestStatusLiveCountsAtTheAPIServer(t *testing.T) {
	t.Parallel()
	// --server wins over the heartbeat's address.
	f := newFakeDaemon(t)
	f.mux.HandleFunc("GET /api/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSONResponse(w, 200, api.Status{State: "alive", Tasks: map[string]int{"paused": 1}})
	})
	home := statusHome(t, beatAt(os.Getpid(), time.Second, "127.0.0.1:1"), "")
	r := cli(t, testEnv(map[string]string{"ERRAND_HOME": home}), f.args("status")...)
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, "tasks   paused 1\n")
}
