package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/store"
)

// Sizes of the benchmark's store: the dashboard must stay fast with this
// much history.
const (
	benchTasks        = 100_000
	benchStepsPerTask = 10
	benchSchedules    = 3_000
)

// benchStore opens a SQLite store holding benchTasks tasks and
// benchTasks×benchStepsPerTask steps and benchSchedules schedules (see
// writeBenchExport), made once (by
// import) and kept in the temporary directory for the next run.
func benchStore(b *testing.B) *errand.Client {
	b.Helper()
	path := filepath.Join(os.TempDir(), fmt.Sprintf("errand-dashboard-bench-v4-%d-%d-%d.db", benchTasks, benchStepsPerTask, benchSchedules))
	if _, err := os.Stat(path); err != nil {
		tmp := path + ".building"
		_ = os.Remove(tmp)
		client, err := errand.Open(context.Background(), "sqlite://"+tmp, &errand.Config{})
		if err != nil {
			b.Fatal(err)
		}
		r, w := io.Pipe()
		go func() { w.CloseWithError(writeBenchExport(w)) }()
		if _, err := client.Import(context.Background(), r); err != nil {
			b.Fatal(err)
		}
		if err := client.Close(); err != nil {
			b.Fatal(err)
		}
		for _, suffix := range []string{"-wal", "-shm"} {
			_ = os.Remove(tmp + suffix)
		}
		if err := os.Rename(tmp, path); err != nil {
			b.Fatal(err)
		}
	}
	client, err := errand.Open(context.Background(), "sqlite://"+path, &errand.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Close() })
	return client
}

// benchTaskID is the id of the benchmark's task i (digits are base32
// digits too).
func benchTaskID(i int) string { return fmt.Sprintf("tsk_%026d", i) }

// The benchmark store's shapes: a plain task, the root of a run of
// benchTreeTasks tasks (ten children a parent) whose first
// benchChainTasks tasks depend each on the one before, and a task in the
// middle of that chain.
const (
	benchPlain      = benchTasks / 3
	benchTreeRoot   = benchTasks / 2
	benchTreeTasks  = 300
	benchChainTasks = 150
	benchChainTask  = benchTreeRoot + benchChainTasks/2
)

func benchInTree(i int) bool { return i > benchTreeRoot && i < benchTreeRoot+benchTreeTasks }

// writeBenchExport writes the benchmark's store as an export: tasks in
// every status, each with its steps, two events and (if it asked) an open
// question; a notification for every ended task; one run drawn as a tree
// and a chain of dependencies; benchSchedules schedules.
func writeBenchExport(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	enc := json.NewEncoder(bw)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	statuses := []errand.Status{errand.StatusCompleted, errand.StatusCompleted, errand.StatusCompleted, errand.StatusFailed,
		errand.StatusCancelled, errand.StatusPending, errand.StatusRunning, errand.StatusInputRequired}
	plan := json.RawMessage(`{"plan":[{"id":"a","title":"Gather sources","status":"completed"},` +
		`{"id":"b","title":"Draft","status":"in_progress"},{"id":"c","title":"Review","status":"pending"}]}`)
	write := func(kind string, data any) error { return enc.Encode(map[string]any{"kind": kind, "data": data}) }
	for i := range benchTasks {
		at := start.Add(time.Duration(i) * time.Minute)
		id := benchTaskID(i)
		st := statuses[i%len(statuses)]
		task := &errand.Task{
			ID: id, RunID: fmt.Sprintf("run_%026d", i), Agent: []string{"default", "research", "writer"}[i%3],
			SessionID: fmt.Sprintf("s%d", i%50), Title: fmt.Sprintf("Task %d", i), Goal: fmt.Sprintf("Look into thing %d and report", i),
			Input: json.RawMessage(`{}`), Metadata: json.RawMessage(`{}`), Tags: []string{}, DependsOn: []string{},
			Priority: 5, Status: st, Attempt: 1, MaxAttempts: 3, RunAt: at, CreatedAt: at, UpdatedAt: at.Add(time.Minute),
			Progress:   &errand.Progress{CurrentStep: 5, TotalSteps: 10, Percentage: 50, Label: "halfway"},
			Consumed:   &errand.Consumed{Tokens: 12_000, CostUSD: 0.012 * float64(i%17), ToolCalls: 4},
			Checkpoint: plan,
		}
		if benchInTree(i) {
			task.RunID = fmt.Sprintf("run_%026d", benchTreeRoot)
			task.ParentID = benchTaskID(benchTreeRoot + (i-benchTreeRoot-1)/10)
			if i < benchTreeRoot+benchChainTasks {
				task.DependsOn = []string{benchTaskID(i - 1)}
			}
		}
		switch {
		case st.Terminal():
			task.StartedAt, task.FinishedAt = at, at.Add(time.Minute)
		case st == errand.StatusRunning:
			task.StartedAt, task.LeaseOwner, task.LeaseExpiresAt, task.LeaseToken = at, "bench:1:x", at.Add(time.Hour), 1
		}
		if st == errand.StatusFailed {
			task.Error = &errand.TaskError{Code: []string{"upstream_down", "timeout", "bad_result"}[i%3], Message: "it broke"}
		}
		if err := write("task", &store.TaskRecord{Task: task}); err != nil {
			return err
		}
		for _, blocker := range task.DependsOn {
			if err := write("dependency", &errand.Dependency{TaskID: id, DependsOnID: blocker, Kind: store.DependencyBlocks}); err != nil {
				return err
			}
		}
		for n := range benchStepsPerTask {
			step := &errand.Step{
				TaskID: id, StepNo: n + 1, Type: "llm_call", Status: "completed", IdempotencyKey: fmt.Sprintf("%s:%d:0", id, n+1),
				Input: json.RawMessage(`{"prompt":"step"}`), Output: json.RawMessage(`{"text":"done"}`),
				TokensIn: 1000, TokensOut: 200, CostUSD: 0.0012, DurationMS: 900, CreatedAt: at, UpdatedAt: at,
			}
			if err := write("step", step); err != nil {
				return err
			}
		}
		if st == errand.StatusInputRequired {
			in := &errand.InputRequest{ID: fmt.Sprintf("inp_%026d", i), TaskID: id, Question: fmt.Sprintf("Which source for thing %d?", i),
				Status: errand.InputPending, CreatedAt: at.Add(time.Minute)}
			if err := write("input", &store.InputRecord{InputRequest: in}); err != nil {
				return err
			}
		}
	}
	for i := range benchTasks {
		at := start.Add(time.Duration(i) * time.Minute)
		st := statuses[i%len(statuses)]
		created := &errand.Event{ID: int64(2*i + 1), Type: errand.EventTaskCreated, TaskID: benchTaskID(i), Actor: errand.ActorUser,
			Data: json.RawMessage(`{"to":"pending"}`), CreatedAt: at}
		ended := &errand.Event{ID: int64(2*i + 2), Type: "task." + string(st), TaskID: benchTaskID(i), Actor: "worker:bench",
			Data: json.RawMessage(`{}`), CreatedAt: at.Add(time.Minute)}
		if err := write("event", created); err != nil {
			return err
		}
		if err := write("event", ended); err != nil {
			return err
		}
	}
	for i := range benchTasks {
		st := statuses[i%len(statuses)]
		if !st.Terminal() {
			continue
		}
		n := &errand.Notification{ID: int64(i + 1), SessionID: fmt.Sprintf("s%d", i%50), TaskID: benchTaskID(i), EventID: int64(2*i + 2),
			EventType: "task." + string(st), Text: fmt.Sprintf("[Task %s] 'Task %d'", st, i), CreatedAt: start.Add(time.Duration(i+1) * time.Minute)}
		if err := write("notification", n); err != nil {
			return err
		}
	}
	overlaps := []string{errand.OverlapSkip, errand.OverlapBufferOne, errand.OverlapAllowAll, errand.OverlapCancelPrevious}
	for i := range benchSchedules {
		sc := &errand.Schedule{
			ID: fmt.Sprintf("sch_%026d", i+1), Name: fmt.Sprintf("schedule-%05d", i), Kind: errand.ScheduleCron, Spec: "0 3 * * *",
			CatchUp: "one", Overlap: overlaps[i%len(overlaps)], Enabled: true, Task: json.RawMessage(`{"goal":"tidy up"}`),
			NextRunAt: start.Add(24 * time.Hour), LastRunAt: start, LastTaskID: benchTaskID(i), FireCount: int64(i),
			CreatedAt: start, UpdatedAt: start,
		}
		if err := write("schedule", sc); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// BenchmarkPages renders each page with 100,000 tasks and 1,000,000 steps
// in the store. The target is under 200 ms a page (server time).
//
//	go test -run '^$' -bench Pages -benchtime 20x ./internal/dashboard/
func BenchmarkPages(b *testing.B) {
	client := benchStore(b)
	d, err := New(Config{Client: client, Token: testToken})
	if err != nil {
		b.Fatal(err)
	}
	_, cookie := d.sessions.issue()
	// A cursor half-way down the list.
	var deep string
	for range benchTasks / 2 / 1000 {
		page, err := client.List(context.Background(), &errand.ListParams{Cursor: deep, Limit: 1000})
		if err != nil {
			b.Fatal(err)
		}
		deep = page.NextCursor
	}
	// Each page, and something it must show: the benchmark measures the
	// page at its fullest.
	for _, page := range []struct{ name, path, shows string }{
		{"tasks", "/", "Older tasks"},
		{"tasks_failed", "/?status=failed", `class="task status-failed"`},
		{"tasks_agent_session", "/?agent=writer&session=s7", "Older tasks"},
		{"tasks_50000_deep", "/?cursor=" + url.QueryEscape(deep), "Task 49999"},
		{"tasks_text", "/?q=thing+4", "Task 49999"},
		{"tasks_text_rare", "/?q=thing+99999+", "Task 99999"},
		{"tasks_text_none", "/?q=nowhere", "No tasks match"},
		{"task", "/tasks/" + benchTaskID(benchPlain), "Gather sources"},
		{"task_tree_root", "/tasks/" + benchTaskID(benchTreeRoot), "Only part of it is drawn"},
		{"task_in_chain", "/tasks/" + benchTaskID(benchChainTask), "<h2>Dependencies</h2>"},
		{"task_live", "/tasks/" + benchTaskID(benchChainTask) + "/live", "progress"},
		{"queue", "/queue", "tasks wait for an answer"},
		{"money", "/money", "Spend per hour today"},
		{"schedules", "/schedules", "Next page"},
		{"schedules_deep", "/schedules?cursor=schedule-02000", "schedule-02049"},
		{"health", "/health", "upstream_down"},
	} {
		b.Run(page.name, func(b *testing.B) {
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, page.path, nil)
				req.AddCookie(&http.Cookie{Name: d.sessions.name, Value: cookie})
				rec := httptest.NewRecorder()
				d.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), page.shows) {
					b.Fatalf("%s: %d, want it to show %q: %s", page.path, rec.Code, page.shows, rec.Body.String())
				}
			}
		})
	}
}
