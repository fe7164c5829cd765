package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/pgtest"
	"github.com/errandhq/errand/internal/webhook"
)

// TestWebhookDeliveredOnceAcrossDaemons runs three errand serve processes
// on one PostgreSQL database, all with the same webhook: every event of
// the tasks submitted through them reaches the receiver exactly once.
// Then the daemon delivering the hook is killed with SIGKILL: another
// takes the hook over once its lease runs out, and the events written
// after the kill all arrive, within the lease and a few seconds.
func TestWebhookDeliveredOnceAcrossDaemons(t *testing.T) {
	const (
		tasksPerBatch = 12
		// takeover is when, after the kill, another daemon holds the hook
		// at the latest: the lease runs out, then it asks.
		takeover = webhook.DefaultLeaseTTL + webhook.DefaultLeaseTTL/3
		slack    = 3 * time.Second // a post's way on a loaded machine
	)
	dsn := pgtest.DSN(t)
	shared := t.TempDir()
	const secret = "e2e-leader-secret"
	recv := newLeaderReceiver(t, secret)
	writeFile(t, filepath.Join(shared, "done.sh"), "#!/bin/sh\ncat >/dev/null\nprintf '{\"status\":\"finish\",\"output\":\"done\"}\\n'\n", 0o755)
	daemons := make([]*daemon, 3)
	for i := range daemons {
		home := t.TempDir()
		writeFile(t, filepath.Join(home, "errand.yaml"), fmt.Sprintf(`
store: %q
workers: 2
agents:
  default: {kind: exec, command: [%q]}
webhooks:
  - url: %s/hook
    secret: %s
    allow_private: true
`, dsn, filepath.Join(shared, "done.sh"), recv.srv.URL, secret), 0o600)
		daemons[i] = startDaemon(t, home)
	}

	// The first daemon to ask holds the hook and makes its cursor, at the
	// newest event: tasks are submitted once it exists.
	leader := waitLogged(t, daemons, "new webhook starts at the newest event", time.Minute)
	require.Equal(t, []*daemon{leader}, delivering(daemons), "one daemon delivers the hook")

	submit := func(through []*daemon, batch int) []string {
		ids := make([]string, tasksPerBatch)
		for i := range ids {
			var task api.Task
			d := through[i%len(through)]
			require.Equal(t, http.StatusCreated, d.api("POST", "/api/tasks", map[string]any{"goal": fmt.Sprintf("batch %d task %d", batch, i)}, &task))
			ids[i] = task.ID
		}
		return ids
	}

	first := submit(daemons, 1)
	firstEvents := eventIDs(journalOf(t, daemons[0], first))
	recv.waitFor(t, firstEvents, time.Minute)
	before := recv.snapshot()
	for id, p := range before {
		require.Equal(t, 1, p.n, "event %d posted once, by one daemon", id)
	}

	leader.kill9()
	killedAt := time.Now()
	var survivors []*daemon
	for _, d := range daemons {
		if d != leader {
			survivors = append(survivors, d)
		}
	}
	second := submit(survivors, 2)
	secondEvents := journalOf(t, survivors[0], second)
	recv.waitFor(t, eventIDs(secondEvents), time.Minute)

	after := recv.snapshot()
	for _, ev := range secondEvents {
		got := after[ev.ID]
		require.Equal(t, 1, got.n, "event %d posted once", ev.ID)
		// Posted once another daemon holds the hook, or once written.
		due := killedAt.Add(takeover)
		if ev.CreatedAt.After(due) {
			due = ev.CreatedAt
		}
		require.LessOrEqual(t, got.first.Sub(due), slack, "event %d arrived %s after the kill", ev.ID, got.first.Sub(killedAt))
	}
	// Only the event in flight at the kill, if any, may be posted again.
	var resent []int64
	for _, id := range firstEvents {
		if after[id].n > 1 {
			resent = append(resent, id)
		}
	}
	require.Subset(t, firstEvents[len(firstEvents)-1:], resent)
	require.Len(t, delivering(survivors), 1, "one survivor took the hook over")

	for _, d := range survivors {
		d.stop()
	}
}

// delivering returns the daemons that logged that they deliver the hook.
func delivering(daemons []*daemon) []*daemon {
	var out []*daemon
	for _, d := range daemons {
		if strings.Contains(d.log(), "holds the webhook's lease") {
			out = append(out, d)
		}
	}
	return out
}

// journalOf reads the journal from its start until every task in ids has
// completed, and returns those tasks' events, in order.
func journalOf(t *testing.T, d *daemon, ids []string) []sse {
	t.Helper()
	mine := map[string]bool{}
	for _, id := range ids {
		mine[id] = true
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var events []sse
	completed := 0
	for ev := range d.stream(ctx, "/api/events?after=0", 0) {
		if !mine[ev.TaskID] {
			continue
		}
		events = append(events, ev)
		if ev.Type == "task.completed" {
			if completed++; completed == len(ids) {
				return events
			}
		}
	}
	t.Fatalf("%d of %d tasks completed", completed, len(ids))
	return nil
}

// eventIDs returns the events' ids.
func eventIDs(events []sse) []int64 {
	out := make([]int64, len(events))
	for i, ev := range events {
		out[i] = ev.ID
	}
	return out
}

// leaderReceiver is a webhook endpoint that verifies signatures and counts
// the posts of each event id.
type leaderReceiver struct {
	key []byte
	srv *httptest.Server

	mu      sync.Mutex
	got     map[int64]posts
	changed chan struct{}
}

// posts is how many times an event was posted, and when first.
type posts struct {
	n     int
	first time.Time
}

func newLeaderReceiver(t *testing.T, secret string) *leaderReceiver {
	key, err := webhook.Key(secret)
	require.NoError(t, err)
	r := &leaderReceiver{key: key, got: map[int64]posts{}, changed: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if err := webhook.Verify(r.key, req.Header, body, time.Now(), 0); err != nil {
			t.Errorf("webhook signature: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var ev api.Event
		if err := json.Unmarshal(body, &ev); err != nil || req.Header.Get(webhook.HeaderID) != fmt.Sprint(ev.ID) {
			t.Errorf("webhook-id %q, body %s", req.Header.Get(webhook.HeaderID), body)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		p := r.got[ev.ID]
		if p.n == 0 {
			p.first = time.Now()
		}
		p.n++
		r.got[ev.ID] = p
		close(r.changed)
		r.changed = make(chan struct{})
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *leaderReceiver) snapshot() map[int64]posts {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[int64]posts, len(r.got))
	for id, p := range r.got {
		out[id] = p
	}
	return out
}

// waitFor waits until every id was posted.
func (r *leaderReceiver) waitFor(t *testing.T, ids []int64, within time.Duration) {
	t.Helper()
	timeout := time.After(within)
	for {
		r.mu.Lock()
		var missing []int64
		for _, id := range ids {
			if r.got[id].n == 0 {
				missing = append(missing, id)
			}
		}
		changed := r.changed
		r.mu.Unlock()
		if len(missing) == 0 {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("webhook never got events %v", missing)
		}
	}
}
