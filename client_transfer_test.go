package errand

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

// storeRun claims the task (by its agent, unique per task in these tests)
// through the client's store and returns the claim.
func storeRun(t *testing.T, c *Client, task *Task) *Task {
	t.Helper()
	claimed, err := c.store.TaskLeaseMany(t.Context(), &store.TaskLeaseManyParams{
		Owner: "test:1:x", Limit: 1, TTL: time.Hour, Agents: []string{task.Agent},
	})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.Equal(t, task.ID, claimed[0].ID)
	return claimed[0]
}

// storeFinish ends a claim through the client's store.
func storeFinish(t *testing.T, c *Client, p store.TaskFinishParams) {
	t.Helper()
	errs, err := c.store.TaskFinishMany(t.Context(), []*store.TaskFinishParams{&p})
	require.NoError(t, err)
	require.NoError(t, errs[0])
}

// fillTransfer gives c tasks in several states, with steps, questions,
// dependencies and notifications, and returns their ids.
func fillTransfer(t *testing.T, c *Client) []string {
	t.Helper()
	ctx := t.Context()
	submit := func(p SubmitParams) *Task {
		t.Helper()
		task, err := c.Submit(ctx, &p)
		require.NoError(t, err)
		return task
	}

	done := submit(SubmitParams{Goal: "Research <X> & report", Agent: "done", SessionID: "s1", Tags: []string{"research"},
		Input: json.RawMessage(`{"topic":"a<b"}`), Budget: &Budget{MaxTokens: 10_000, MaxCostUSD: 2}, MaxSteps: 5})
	run := storeRun(t, c, done)
	lease := store.Lease{TaskID: run.ID, Token: run.LeaseToken}
	for i, out := range []string{`{"text":"<b>bold</b> & more"}`, `{"text":"second"}`} {
		key := done.ID + ":step:" + string(rune('1'+i))
		_, err := c.store.StepStart(ctx, &store.StepStartParams{Lease: lease, StepNo: i + 1, Type: store.StepLLMCall,
			IdempotencyKey: key, Input: json.RawMessage(`{"prompt":"go"}`)})
		require.NoError(t, err)
		_, err = c.store.StepFinish(ctx, &store.StepFinishParams{Lease: lease, IdempotencyKey: key, Status: store.StepDone,
			Output: json.RawMessage(out), TokensIn: 100, TokensOut: 20, CostUSD: 0.01, DurationMS: 300,
			Checkpoint: json.RawMessage(`{"step":` + string(rune('1'+i)) + `}`)})
		require.NoError(t, err)
	}
	storeFinish(t, c, store.TaskFinishParams{Lease: lease, Status: store.StatusCompleted,
		Result: json.RawMessage(`{"output":"Found 3 papers <ok>","warning":null}`)})

	asking := submit(SubmitParams{Goal: "Pick a format", Agent: "asking", SessionID: "s1"})
	run = storeRun(t, c, asking)
	storeFinish(t, c, store.TaskFinishParams{Lease: store.Lease{TaskID: run.ID, Token: run.LeaseToken}, Status: store.StatusInputRequired,
		Ask: &store.InputAsk{ID: "inp_transfer", Question: "PDF or HTML?", Context: json.RawMessage(`{"options":["pdf","html"]}`)}})

	blocked := submit(SubmitParams{Goal: "Publish", Agent: "blocked", DependsOn: []string{asking.ID}, SessionID: "s2"})
	_, err := c.AddDependency(ctx, blocked.ID, done.ID, "related")
	require.NoError(t, err)

	failing := submit(SubmitParams{Goal: "Deploy", Agent: "failing", SessionID: "s2"})
	run = storeRun(t, c, failing)
	storeFinish(t, c, store.TaskFinishParams{Lease: store.Lease{TaskID: run.ID, Token: run.LeaseToken}, Status: store.StatusFailed,
		Error: &store.TaskError{Code: "quota", Message: "used up"}})

	cancelled := submit(SubmitParams{Goal: "Old idea", Agent: "cancelled"})
	_, err = c.Cancel(ctx, cancelled.ID, "not needed")
	require.NoError(t, err)

	running := submit(SubmitParams{Goal: "Long job", Agent: "running"})
	run = storeRun(t, c, running)
	require.NoError(t, c.store.TaskCheckpoint(ctx, &store.TaskCheckpointParams{
		Lease: store.Lease{TaskID: run.ID, Token: run.LeaseToken}, Checkpoint: json.RawMessage(`{"goal":"Long job","step":1}`)}))

	child := submit(SubmitParams{Goal: "Sub step", Agent: "child", ParentID: running.ID})

	first, err := c.Inbox(ctx, &InboxParams{SessionID: "s1", Limit: 1})
	require.NoError(t, err)
	_, err = c.InboxAck(ctx, &InboxAckParams{IDs: []int64{first[0].ID}})
	require.NoError(t, err)
	return []string{done.ID, asking.ID, blocked.ID, failing.ID, cancelled.ID, running.ID, child.ID}
}

func exportBytes(t *testing.T, c *Client, since time.Time) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, c.Export(t.Context(), &buf, since))
	return buf.Bytes()
}

func TestExportImportRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	src := openTest(t, nil)
	ids := fillTransfer(t, src)
	dump := exportBytes(t, src, time.Time{})

	// Every line is one {"kind", "data"} object; each task comes before
	// its rows, and the journal after the tasks.
	kinds := map[string]int{}
	var order []string
	sc := bufio.NewScanner(bytes.NewReader(dump))
	for sc.Scan() {
		var line struct {
			Kind string          `json:"kind"`
			Data json.RawMessage `json:"data"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line), "line %q", sc.Text())
		require.NotEmpty(t, line.Data)
		kinds[line.Kind]++
		if len(order) == 0 || order[len(order)-1] != line.Kind {
			order = append(order, line.Kind)
		}
	}
	require.Equal(t, map[string]int{"task": 7, "step": 2, "input": 1, "dependency": 2, "event": kinds["event"], "notification": 4}, kinds)
	require.Equal(t, "task", order[0])
	require.Equal(t, []string{"event", "notification"}, order[len(order)-2:])
	require.Contains(t, string(dump), `"output":"Found 3 papers <ok>"`, "stored JSON is written as it is")

	dst := openTest(t, nil)
	stats, err := dst.Import(ctx, bytes.NewReader(dump))
	require.NoError(t, err)
	require.Equal(t, &ImportStats{Tasks: 7, Steps: 2, Events: kinds["event"], Inputs: 1, Dependencies: 2, Notifications: 4}, stats)

	for _, id := range ids {
		want, err := src.Get(ctx, id)
		require.NoError(t, err)
		got, err := dst.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, got)

		wantSteps, err := src.Steps(ctx, id)
		require.NoError(t, err)
		gotSteps, err := dst.Steps(ctx, id)
		require.NoError(t, err)
		require.Equal(t, wantSteps, gotSteps)

		wantHistory, err := src.History(ctx, id)
		require.NoError(t, err)
		gotHistory, err := dst.History(ctx, id)
		require.NoError(t, err)
		require.Equal(t, wantHistory, gotHistory)
	}
	wantInputs, err := src.PendingInputs(ctx)
	require.NoError(t, err)
	gotInputs, err := dst.PendingInputs(ctx)
	require.NoError(t, err)
	require.Len(t, gotInputs, 1)
	require.Equal(t, wantInputs, gotInputs)
	wantInbox, err := src.Inbox(ctx, nil)
	require.NoError(t, err)
	gotInbox, err := dst.Inbox(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, wantInbox, gotInbox)
	wantList, err := src.List(ctx, &ListParams{Limit: 100})
	require.NoError(t, err)
	gotList, err := dst.List(ctx, &ListParams{Limit: 100})
	require.NoError(t, err)
	require.Equal(t, wantList, gotList)

	require.Equal(t, string(dump), string(exportBytes(t, dst, time.Time{})), "exporting the import gives the same file")

	// The imported store goes on: new events follow the imported ones, and
	// the question can be answered.
	last, err := dst.LastEventID(ctx)
	require.NoError(t, err)
	wantLast, err := src.LastEventID(ctx)
	require.NoError(t, err)
	require.Equal(t, wantLast, last)
	_, err = dst.Answer(ctx, ids[1], "PDF")
	require.NoError(t, err)
	history, err := dst.History(ctx, ids[1])
	require.NoError(t, err)
	require.Greater(t, history[len(history)-1].ID, last)

	// A second import is refused.
	_, err = dst.Import(ctx, bytes.NewReader(dump))
	require.ErrorIs(t, err, ErrStoreNotEmpty)
}

func TestExportSince(t *testing.T) {
	t.Parallel()
	c := openTest(t, nil)
	fillTransfer(t, c)
	require.Empty(t, exportBytes(t, c, time.Now().Add(time.Hour)), "nothing was written after since")
	require.Equal(t, exportBytes(t, c, time.Time{}), exportBytes(t, c, time.Unix(0, 0)))
}

func TestImportRefusesBadInput(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	task := `{"kind":"task","data":{"id":"tsk_01M870SJ45FB7S2S10WP17S98Z","run_id":"run_1","agent":"a","title":"t","goal":"g","status":"pending","max_attempts":3,"run_at":"2026-01-02T03:04:05Z","created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z"}}`
	event := `{"kind":"event","data":{"id":1,"type":"task.created","task_id":"tsk_01M870SJ45FB7S2S10WP17S98Z","actor":"user","data":{"to":"pending"},"created_at":"2026-01-02T03:04:05Z"}}`
	c := openTest(t, nil)
	for _, tc := range []struct {
		name  string
		input string
		want  string
	}{
		{"NotJSON", task + "\nnot json\n", "import line 2: not an export line"},
		{"UnknownKind", `{"kind":"widget","data":{}}`, `import line 1: unknown kind "widget"`},
		{"UnknownEnvelopeField", `{"kind":"task","data":{},"extra":1}`, `import line 1: not an export line`},
		{"NoKind", `{"data":{"id":"x"}}`, `import line 1: no "kind"`},
		{"NoData", `{"kind":"task"}`, `import line 1: task: no "data"`},
		{"TaskWithoutID", `{"kind":"task","data":{"status":"pending"}}`, "import line 1: task: no id"},
		{"BadStatus", `{"kind":"task","data":{"id":"tsk_2","status":"sleeping"}}`, `import line 1: task tsk_2: unknown status "sleeping"`},
		{"NotATaskID", `{"kind":"task","data":{"id":"tsk_2","status":"pending"}}`, `import line 1: task "tsk_2": not a task id`},
		{"BadField", `{"kind":"step","data":{"task_id":"tsk_1","step_no":"one"}}`, "import line 1: step: json"},
		{"EventWithoutID", "\n\n" + `{"kind":"event","data":{"type":"task.created","task_id":"tsk_1"}}`, "import line 3: event: a positive id"},
		{"TwoValues", task + " " + task, "import line 1: more than one JSON value"},
		{"Schedule without id", `{"kind":"schedule","data":{"name":"n"}}`, "import line 1: schedule \"\": a schedule id"},
		{"Schedule with bad cron", `{"kind":"schedule","data":{"id":"sch_01JH0000000000000000000000","name":"n","kind":"cron","spec":"61 * * * *","task":{"goal":"x"}}}`, "spec"},
		{"Duplicate", task + "\n" + event + "\n" + task + "\n", "import lines 1-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Import(ctx, strings.NewReader(tc.input))
			require.ErrorContains(t, err, tc.want)
			last, err := c.LastEventID(ctx)
			require.NoError(t, err)
			require.Zero(t, last, "nothing was written")
			list, err := c.List(ctx, &ListParams{Limit: 10})
			require.NoError(t, err)
			require.Empty(t, list.Tasks, "nothing was written")
		})
	}
	_, err := c.Import(ctx, strings.NewReader(task+"\n"+task))
	require.ErrorIs(t, err, store.ErrConflict)

	stats, err := c.Import(ctx, strings.NewReader("\n"+task+"\r\n"+event+"\n\n"))
	require.NoError(t, err, "blank lines and CRLF are fine")
	require.Equal(t, &ImportStats{Tasks: 1, Events: 1}, stats)
	got, err := c.Get(ctx, "tsk_01M870SJ45FB7S2S10WP17S98Z")
	require.NoError(t, err)
	require.Equal(t, StatusPending, got.Status)
}

func TestImportRefusesNonEmptyStore(t *testing.T) {
	t.Parallel()
	src := openTest(t, nil)
	fillTransfer(t, src)
	dump := exportBytes(t, src, time.Time{})

	c := openTest(t, nil)
	_, err := c.Submit(t.Context(), &SubmitParams{Goal: "already here"})
	require.NoError(t, err)
	stats, err := c.Import(t.Context(), bytes.NewReader(dump))
	require.ErrorIs(t, err, ErrStoreNotEmpty)
	require.ErrorContains(t, err, "1 tasks")
	require.Nil(t, stats)
	list, err := c.List(t.Context(), &ListParams{Limit: 100})
	require.NoError(t, err)
	require.Len(t, list.Tasks, 1)
}

func TestImportStreamsInBatches(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	src := openTest(t, nil)
	const n = importBatchRows + 50 // more tasks than one transaction takes
	for i := range n {
		_, err := src.Submit(ctx, &SubmitParams{Goal: "task " + strings.Repeat("x", i%7), SessionID: "bulk"})
		require.NoError(t, err)
	}
	dump := exportBytes(t, src, time.Time{})
	dst := openTest(t, nil)
	stats, err := dst.Import(ctx, bytes.NewReader(dump))
	require.NoError(t, err)
	require.Equal(t, &ImportStats{Tasks: n, Events: n}, stats)
	require.Equal(t, string(dump), string(exportBytes(t, dst, time.Time{})))
}
