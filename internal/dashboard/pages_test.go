package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/store"
)

// The task page shows the agent's plan (done, current, to do), the run's
// subtask tree and the dependency graph as SVG with blocked-by lists, and
// the artifact; task text inside the drawings stays text.
func TestTaskPageShowsPlanTreeGraphAndArtifact(t *testing.T) {
	h := setup(t)
	b := h.browser(t)
	h.login(t, b)
	planned := make(chan struct{})
	agent := errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
		if run.Task().Goal == "research" {
			plan := []map[string]string{
				{"id": "a", "title": "Gather <sources>", "status": "completed"},
				{"id": "b", "title": "Draft the summary", "status": "in_progress"},
				{"id": "c", "title": "Review it", "status": "pending"},
			}
			if err := run.Checkpoint(ctx, map[string]any{"plan": plan}); err != nil {
				return errand.Result{}, err
			}
			close(planned)
		}
		<-ctx.Done()
		return errand.Result{}, ctx.Err()
	})
	require.NoError(t, h.client.RegisterAgent("default", agent))
	engine, err := errand.NewEngine(h.client, &errand.EngineConfig{Workers: 4})
	require.NoError(t, err)
	require.NoError(t, engine.Start(t.Context()))
	t.Cleanup(func() { _ = engine.Stop(context.Background()) })

	submit := func(p *errand.SubmitParams) *errand.Task {
		t.Helper()
		task, err := h.client.Submit(t.Context(), p)
		require.NoError(t, err)
		return task
	}
	root := submit(&errand.SubmitParams{Goal: "research", Title: "Research the market"})
	<-planned
	child := submit(&errand.SubmitParams{Goal: "g", Title: "Child one", ParentID: root.ID})
	grandchild := submit(&errand.SubmitParams{Goal: "g", Title: "<script>alert(1)</script>", ParentID: child.ID})
	sibling := submit(&errand.SubmitParams{Goal: "g", Title: "Child two", ParentID: root.ID})

	_, page := get(t, b, h.srv.URL+"/tasks/"+root.ID)
	require.Contains(t, page, `<h3>Plan</h3>`)
	require.Regexp(t, `class="plan-completed".*✓.*Gather &lt;sources&gt;.*done`, page)
	require.Regexp(t, `class="plan-in_progress".*▶.*Draft the summary.*current`, page)
	require.Regexp(t, `class="plan-pending".*○.*Review it.*to do`, page)
	_, live := get(t, b, h.srv.URL+"/tasks/"+root.ID+"/live")
	require.Contains(t, live, "Draft the summary", "the plan moves with the live part")

	require.Contains(t, page, "<h2>Subtask tree</h2>")
	for _, task := range []*errand.Task{child, grandchild, sibling} {
		require.Contains(t, page, `<a href="/tasks/`+task.ID+`"><g class="node`, task.Title)
	}
	require.Regexp(t, `<a href="/tasks/`+root.ID+`"><g class="node status-running current"`, page)
	require.Equal(t, 3, strings.Count(page, `<path class="edge" `), "one line to each subtask")
	require.NotContains(t, page, "<script>alert", "a title in the tree is text")
	require.Contains(t, page, "&lt;script&gt;alert(1)&lt;/script&gt;")
	require.NotContains(t, page, "<h2>Dependencies</h2>", "no dependencies, no graph")

	// fetch ← parse ← report, and notes related to parse.
	fetch := submit(&errand.SubmitParams{Goal: "g", Title: "Fetch the data"})
	parse := submit(&errand.SubmitParams{Goal: "g", Title: "Parse it", DependsOn: []string{fetch.ID}})
	report := submit(&errand.SubmitParams{Goal: "g", Title: "Write the report", DependsOn: []string{parse.ID}})
	notes := submit(&errand.SubmitParams{Goal: "g", Title: "<img src=x onerror=alert(1)>"})
	_, err = h.client.AddDependency(t.Context(), notes.ID, parse.ID, "related")
	require.NoError(t, err)

	_, page = get(t, b, h.srv.URL+"/tasks/"+parse.ID)
	require.Contains(t, page, "<h2>Dependencies</h2>")
	require.Regexp(t, `<dt>Blocked by</dt><dd class="links"><span class="link waiting"><a href="/tasks/`+fetch.ID+`">`, page)
	require.Regexp(t, `<dt>Needed by</dt><dd class="links">.*/tasks/`+report.ID+`.*/tasks/`+notes.ID+`.*related`, page)
	require.Equal(t, 2, strings.Count(page, `<path class="edge blocks"`))
	require.Equal(t, 1, strings.Count(page, `<path class="edge related"`))
	require.NotContains(t, page, "<img src=x", "a title in the graph is text")
	for _, task := range []*errand.Task{fetch, report, notes} {
		require.Contains(t, page, `<a href="/tasks/`+task.ID+`"><g class="node`)
	}
	require.NotContains(t, page, "<h2>Subtask tree</h2>", "a run of one task has no tree")
	_, page = get(t, b, h.srv.URL+"/tasks/"+report.ID)
	require.Regexp(t, `<dt>Blocked by</dt><dd class="links"><span class="link waiting"><a href="/tasks/`+parse.ID, page)
	require.Contains(t, page, `<a href="/tasks/`+fetch.ID+`"><g class="node`, "the graph reaches past the next task")
	_, page = get(t, b, h.srv.URL+"/tasks/"+notes.ID)
	require.Regexp(t, `<dt>Blocked by</dt><dd class="links">nothing</dd>`, page, "a related task blocks nothing")

	// The artifact is shown as text and downloads whole.
	dir := filepath.Join(h.home, "artifacts", fetch.ID)
	require.NoError(t, os.MkdirAll(dir, 0o700))
	body := "# Fetch the data\n\n<b>rows</b>: 12\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "output.md"), []byte(body), 0o600))
	_, page = get(t, b, h.srv.URL+"/tasks/"+fetch.ID)
	require.Contains(t, page, "<h3>Artifact</h3>")
	require.Contains(t, page, "&lt;b&gt;rows&lt;/b&gt;: 12")
	require.NotContains(t, page, "shown in part")
	resp, got := get(t, b, h.srv.URL+"/tasks/"+fetch.ID+"/artifact")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, body, got)
	require.Equal(t, `attachment; filename="`+fetch.ID+`.md"`, resp.Header.Get("Content-Disposition"))
	require.Equal(t, "text/markdown; charset=utf-8", resp.Header.Get("Content-Type"))

	big := strings.Repeat("line\n", maxArtifactShown/5+100)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "output.md"), []byte(big), 0o600))
	_, page = get(t, b, h.srv.URL+"/tasks/"+fetch.ID)
	require.Contains(t, page, "(shown in part)")
	_, got = get(t, b, h.srv.URL+"/tasks/"+fetch.ID+"/artifact")
	require.Equal(t, big, got, "the download is whole")

	_, page = get(t, b, h.srv.URL+"/tasks/"+parse.ID)
	require.NotContains(t, page, "<h3>Artifact</h3>")
	for _, path := range []string{"/tasks/" + parse.ID + "/artifact", "/tasks/..%2F..%2Fetc/artifact", "/tasks/tsk_none/artifact"} {
		resp, _ := get(t, b, h.srv.URL+path)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
	}
}

// Every field a task was submitted with is on its page.
func TestTaskPageShowsEveryField(t *testing.T) {
	h := setup(t)
	b := h.browser(t)
	h.login(t, b)
	task, err := h.client.Submit(t.Context(), &errand.SubmitParams{
		Goal: "Summarise the week", Title: "Weekly summary", SessionID: "alice", Tags: []string{"weekly"},
		Metadata: []byte(`{"team":"<ops>"}`), Budget: &store.Budget{MaxTokens: 5000, MaxCostUSD: 0.25, MaxToolCalls: 7},
		MaxSteps: 12, Tools: []string{"search"}, ToolsDeny: []string{"shell"}, SystemPrompt: "Be brief & <kind>.",
		ResultRoute: "silent", IdempotencyKey: "week-48",
	})
	require.NoError(t, err)
	_, page := get(t, b, h.srv.URL+"/tasks/"+task.ID)
	for _, want := range []string{
		"<dd>alice</dd>", `<span class="badge">weekly</span>`, "&#34;team&#34;: &#34;&lt;ops&gt;&#34;",
		"5000 tokens · $0.2500 · 7 tool calls", "<dt>Max steps</dt><dd>12</dd>", "<code>search</code>", "<code>shell</code>",
		"Be brief &amp; &lt;kind&gt;.", "<dt>Result route</dt><dd>silent</dd>", "<code>week-48</code>", "<dt>Run at</dt>", "<dt>Updated</dt>",
	} {
		require.Contains(t, page, want)
	}
	require.NotContains(t, page, "<h3>Input</h3>", "an empty input is not shown")
}

// With more questions and notifications than fit, the queue shows the
// questions that have waited longest and the newest notifications.
func TestQueueShowsTheOldestQuestionsAndTheNewestNotifications(t *testing.T) {
	h := setup(t)
	b := h.browser(t)
	h.login(t, b)
	var export strings.Builder
	enc := json.NewEncoder(&export)
	start := time.Now().Add(-time.Hour)
	const questions, notes = queueQuestions + 10, queueInbox + 20
	for i := range questions {
		at := start.Add(time.Duration(i) * time.Second)
		id := fmt.Sprintf("tsk_%026d", i+1)
		require.NoError(t, enc.Encode(map[string]any{"kind": "task", "data": &store.TaskRecord{Task: &store.Task{
			ID: id, RunID: fmt.Sprintf("run_%026d", i+1), Agent: "default", Goal: "g", Status: store.StatusInputRequired,
			Input: []byte(`{}`), Metadata: []byte(`{}`), Tags: []string{}, DependsOn: []string{}, Attempt: 1, MaxAttempts: 3,
			RunAt: at, CreatedAt: at, UpdatedAt: at,
		}}}))
		require.NoError(t, enc.Encode(map[string]any{"kind": "input", "data": &store.InputRecord{InputRequest: &store.InputRequest{
			ID: fmt.Sprintf("inp_%026d", i+1), TaskID: id, Question: fmt.Sprintf("question number %03d", i), Status: store.InputPending, CreatedAt: at,
		}}}))
	}
	for i := range notes {
		require.NoError(t, enc.Encode(map[string]any{"kind": "notification", "data": &store.Notification{
			ID: int64(i + 1), TaskID: fmt.Sprintf("tsk_%026d", 1), EventID: int64(i + 1), EventType: "task.completed",
			Text: fmt.Sprintf("note number %03d", i), CreatedAt: start.Add(time.Duration(i) * time.Second),
		}}))
	}
	_, err := h.client.Import(t.Context(), strings.NewReader(export.String()))
	require.NoError(t, err)

	_, page := get(t, b, h.srv.URL+"/queue")
	require.Equal(t, queueQuestions, strings.Count(page, `<form class="question"`))
	require.Contains(t, page, fmt.Sprintf("%d tasks wait for an answer; the %d that have waited longest are shown.", questions, queueQuestions))
	require.Contains(t, page, "question number 000")
	require.NotContains(t, page, fmt.Sprintf("question number %03d", questions-1))
	require.Contains(t, page, "The newest 100, newest first.")
	newest, oldestShown := strings.Index(page, fmt.Sprintf("note number %03d", notes-1)), strings.Index(page, fmt.Sprintf("note number %03d", notes-queueInbox))
	require.Positive(t, newest)
	require.Greater(t, oldestShown, newest, "newest first")
	require.NotContains(t, page, fmt.Sprintf("note number %03d", notes-queueInbox-1))
}

// A run too big to draw whole still draws the way from its root to the
// page's task, and says it is partial.
func TestTaskTreeOfABigRunReachesTheRoot(t *testing.T) {
	h := setup(t)
	b := h.browser(t)
	h.login(t, b)
	submit := func(p *errand.SubmitParams) *errand.Task {
		t.Helper()
		task, err := h.client.Submit(t.Context(), p)
		require.NoError(t, err)
		return task
	}
	root := submit(&errand.SubmitParams{Goal: "root", Title: "The root"})
	first := submit(&errand.SubmitParams{Goal: "g", Title: "The first child", ParentID: root.ID})
	deep := submit(&errand.SubmitParams{Goal: "g", Title: "The grandchild", ParentID: first.ID})
	for i := range maxRunTasks + 5 {
		submit(&errand.SubmitParams{Goal: "g", Title: fmt.Sprintf("Later child %d", i), ParentID: root.ID})
	}
	_, page := get(t, b, h.srv.URL+"/tasks/"+deep.ID)
	for _, task := range []*errand.Task{root, first, deep} {
		require.Contains(t, page, `<a href="/tasks/`+task.ID+`"><g class="node`, task.Title)
	}
	require.Contains(t, page, "Only part of it is drawn")
}
