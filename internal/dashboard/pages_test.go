package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
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
		Metadata: []byte(`{"team":"<ops>"}`), Budget: &errand.Budget{MaxTokens: 5000, MaxCostUSD: 0.25, MaxToolCalls: 7},
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
		require.NoError(t, enc.Encode(map[string]any{"kind": "task", "data": &store.TaskRecord{Task: &errand.Task{
			ID: id, RunID: fmt.Sprintf("run_%026d", i+1), Agent: "default", Goal: "g", Status: errand.StatusInputRequired,
			Input: []byte(`{}`), Metadata: []byte(`{}`), Tags: []string{}, DependsOn: []string{}, Attempt: 1, MaxAttempts: 3,
			RunAt: at, CreatedAt: at, UpdatedAt: at,
		}}}))
		require.NoError(t, enc.Encode(map[string]any{"kind": "input", "data": &store.InputRecord{InputRequest: &errand.InputRequest{
			ID: fmt.Sprintf("inp_%026d", i+1), TaskID: id, Question: fmt.Sprintf("question number %03d", i), Status: errand.InputPending, CreatedAt: at,
		}}}))
	}
	for i := range notes {
		require.NoError(t, enc.Encode(map[string]any{"kind": "notification", "data": &errand.Notification{
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

// The money page shows what errand budget shows, from real paid steps
// against a daily limit: the state (open, paused, paused then resumed),
// spend and what it is of the limits, what running steps hold, how many
// tasks wait for room, the alerts of the period, and spend per day and
// per hour as bars with their figures, the daily limit's line and a
// summary in words.
func TestMoneyPageShowsTheGuardItsAlertsAndSpendCharts(t *testing.T) {
	t.Parallel()
	h := setup(t)
	b := h.browser(t)
	h.login(t, b)
	// Each goal is one paid step: what it reserves and what it costs.
	steps := map[string][2]float64{"spend": {0.06, 0.06}, "big": {0.08, 0.08}, "finish": {0.03, 0.04}}
	agent := errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
		step := steps[run.Task().Goal]
		_, err := run.PaidStep(ctx, 1, "model", step[0], func(context.Context, string) (any, float64, error) {
			return "ok", step[1], nil
		})
		return errand.Result{Output: "done"}, err
	})
	require.NoError(t, h.client.RegisterAgent("default", agent))
	engine, err := errand.NewEngine(h.client, &errand.EngineConfig{Workers: 2})
	require.NoError(t, err)
	require.NoError(t, engine.Start(t.Context()))
	t.Cleanup(func() { _ = engine.Stop(context.Background()) })
	_, err = h.client.SetSpendLimits(t.Context(), errand.SpendLimits{DailyUSD: 0.10, AlertThresholds: []float64{0.5},
		OnLimit: errand.OnLimitPauseAll, Timezone: "UTC"})
	require.NoError(t, err)
	submit := func(goal string) string {
		t.Helper()
		task, err := h.client.Submit(t.Context(), &errand.SubmitParams{Goal: goal})
		require.NoError(t, err)
		return task.ID
	}

	// $0.06 spent (an alert at 50 %); $0.08 more does not fit: deferred.
	waitEvent(t, h.client, submit("spend"), "task.completed")
	big := submit("big")
	waitEvent(t, h.client, big, "task.deferred")
	waitEvent(t, h.client, big, "task.released")
	resp, page := get(t, b, h.srv.URL+"/money")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	history, err := h.client.SpendHistory(t.Context(), chartDays)
	require.NoError(t, err)
	today := history.Days[len(history.Days)-1].Start.Format(time.DateOnly)
	var hour time.Time
	for _, s := range history.Hours {
		if s.CostUSD > 0 {
			hour = s.Start
		}
	}
	for _, want := range []string{
		`<span class="badge guard-open">open</span>`,
		"<dd>$0.0600 of $0.1000 (60%)</dd>",
		`<span class="note">no monthly limit</span>`,
		"<dt>Waiting for room</dt><dd>1 task <span",
		"<dt>Held by running steps</dt><dd>$0.0000</dd>",
		"<dt>Alerts at</dt><dd>50%, the limit</dd>",
		"<td>50% of the daily limit</td><td>$0.0600 of $0.1000</td><td>" + today + "</td>",
		"<title>" + today + ": $0.0600</title>",
		"<title>" + hourSpan(hour) + ": $0.0600</title>",
		`class="chart-limit"`, "daily limit $0.1000",
		"$0.0600 spent in the last 30 days; the most in a day was $0.0600, on " + today + ". No day reached the daily limit of $0.1000.",
		"$0.0600 spent today; the most in an hour was $0.0600, " + hourSpan(hour) + ".",
	} {
		require.Contains(t, page, want)
	}
	require.Equal(t, chartDays+len(history.Hours), strings.Count(page, `<g class="chart-slot"><title>`), "a bar and its figure for every day and hour")
	require.Equal(t, 2, strings.Count(page, `<rect class="chart-bar" x=`), "today and this hour")
	require.NotContains(t, page, "chart-over")
	require.NotContains(t, page, "holds work")

	// $0.04 more reaches the limit: work pauses until the day ends.
	waitEvent(t, h.client, submit("finish"), "task.completed")
	_, page = get(t, b, h.srv.URL+"/money")
	for _, want := range []string{
		`<span class="badge guard-paused">paused</span>`, "The spend guard holds work until",
		`<tr class="reached"><td>`, "<td>daily limit reached</td><td>$0.1000 of $0.1000</td>", "<title>" + today + ": $0.1000</title>",
		`class="chart-bar chart-over"`, "1 day reached the daily limit of $0.1000.",
	} {
		require.Contains(t, page, want)
	}
	_, err = h.client.ResumeSpend(t.Context())
	require.NoError(t, err)
	_, page = get(t, b, h.srv.URL+"/money")
	require.Contains(t, page, `<span class="badge guard-resumed">paused then resumed</span> <span class="note">the limit still holds</span>`)
	require.NotContains(t, page, "holds work")
}

// The schedules page shows 50 schedules a page, by name, each with its
// overlap policy, and a next link that walks all of them: 3,000
// schedules are 60 small pages, not one of megabytes. A bad cursor or
// an unknown parameter is refused with a 400.
func TestSchedulesArePagedAndShowTheirOverlap(t *testing.T) {
	t.Parallel()
	h := setup(t)
	b := h.browser(t)
	h.login(t, b)
	const schedules = 3000
	overlaps := []string{errand.OverlapSkip, errand.OverlapBufferOne, errand.OverlapAllowAll, errand.OverlapCancelPrevious}
	var export strings.Builder
	enc := json.NewEncoder(&export)
	at := time.Now().UTC().Truncate(time.Second)
	for i := range schedules {
		require.NoError(t, enc.Encode(map[string]any{"kind": "schedule", "data": &errand.Schedule{
			ID: fmt.Sprintf("sch_%026d", i+1), Name: fmt.Sprintf("sweep-%04d", i), Kind: errand.ScheduleCron, Spec: "0 3 * * *",
			CatchUp: "one", Overlap: overlaps[i%len(overlaps)], Enabled: true, Task: json.RawMessage(`{"goal":"sweep"}`),
			NextRunAt: at.Add(time.Hour), CreatedAt: at, UpdatedAt: at,
		}}))
	}
	_, err := h.client.Import(t.Context(), strings.NewReader(export.String()))
	require.NoError(t, err)

	names := regexp.MustCompile(`<td>(sweep-\d{4})</td>\s*<td>cron</td>\s*<td><code>0 3 \* \* \*</code></td>\s*<td>([a-z_]+)</td>`)
	nextLink := regexp.MustCompile(`<a href="/schedules\?cursor=([^"]*)" rel="next">Next page</a>`)
	path, seen, pages := "/schedules", 0, 0
	for path != "" {
		resp, page := get(t, b, h.srv.URL+path)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.Less(t, len(page), 64<<10, "a page of %d schedules is small", schedulePageSize)
		rows := names.FindAllStringSubmatch(page, -1)
		require.Len(t, rows, min(schedulePageSize, schedules-seen), path)
		for _, row := range rows {
			require.Equal(t, fmt.Sprintf("sweep-%04d", seen), row[1], "by name, none left out or repeated")
			require.Equal(t, overlaps[seen%len(overlaps)], row[2])
			seen++
		}
		pages++
		path = ""
		if m := nextLink.FindStringSubmatch(page); m != nil {
			cursor, err := url.QueryUnescape(html.UnescapeString(m[1]))
			require.NoError(t, err)
			require.Equal(t, rows[len(rows)-1][1], cursor, "the next page starts after this one's last")
			path = "/schedules?cursor=" + url.QueryEscape(cursor)
		}
	}
	require.Equal(t, schedules, seen)
	require.Equal(t, schedules/schedulePageSize, pages)

	// A button on a later page comes back to that page.
	_, page := get(t, b, h.srv.URL+"/schedules?cursor=sweep-0049")
	require.Contains(t, page, `<a href="/schedules">First page</a>`)
	resp, _ := post(t, b, h.srv.URL+"/schedules/"+fmt.Sprintf("sch_%026d", 51)+"/disable",
		url.Values{"csrf": {csrfOf(t, page)}, "cursor": {"sweep-0049"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/schedules?cursor=sweep-0049", resp.Header.Get("Location"))
	_, page = get(t, b, h.srv.URL+"/schedules?cursor=sweep-0049")
	require.Contains(t, page, `<tr class="disabled">`+"\n      <td>sweep-0050</td>")
	_, page = get(t, b, h.srv.URL+"/schedules?cursor=zzz")
	require.Contains(t, page, "No schedules after <code>zzz</code>.")

	for _, bad := range []string{"?cursor=%ff", "?cursor=a%00b", "?cursor=" + strings.Repeat("a", maxScheduleCursor+1),
		"?page=2", "?cursor=a&cursor=b", "?cursor=a&status=running"} {
		resp, page := get(t, b, h.srv.URL+"/schedules"+bad)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, bad)
		require.Contains(t, page, "<h1>Bad Request</h1>", bad)
	}
}

// A schedule stored without an overlap policy fires with its kind's
// default.
func TestOverlapOfDefaultsByKind(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ kind, overlap, want string }{
		{errand.ScheduleCron, "", errand.OverlapSkip},
		{errand.ScheduleInterval, "", errand.OverlapSkip},
		{errand.ScheduleHeartbeat, "", errand.OverlapSkip},
		{errand.ScheduleEvent, "", errand.OverlapAllowAll},
		{errand.ScheduleEvent, errand.OverlapBufferOne, errand.OverlapBufferOne},
		{errand.ScheduleCron, errand.OverlapCancelPrevious, errand.OverlapCancelPrevious},
	} {
		require.Equal(t, c.want, overlapOf(&errand.Schedule{Kind: c.kind, Overlap: c.overlap}), "%s %q", c.kind, c.overlap)
	}
}

// An alert names its share of the daily or monthly limit, or the limit
// reached; the guard alerts at its thresholds and always at the limit.
func TestAlertWords(t *testing.T) {
	t.Parallel()
	require.Equal(t, "50% of the daily limit", alertWhat(store.FiredAlert{Period: store.PeriodDay, Threshold: 0.5}))
	require.Equal(t, "monthly limit reached", alertWhat(store.FiredAlert{Period: store.PeriodMonth, Threshold: 1}))
	require.Equal(t, "80% of the monthly limit", alertWhat(store.FiredAlert{Period: store.PeriodMonth, Threshold: 0.8}))
	require.Equal(t, "the limit", thresholdsText(nil))
	require.Equal(t, "50%, 80%, the limit", thresholdsText([]float64{0.5, 0.8, 1}))
}

// The task page shows a result once: a text output as text (its line
// breaks real, not \n), a JSON output as indented JSON, and an artifact
// that holds the same output only as its download.
func TestTaskPageShowsResultOnce(t *testing.T) {
	h := setup(t)
	b := h.browser(t)
	h.login(t, b)
	const markdownOutput = "## Findings\n\n- <b>one</b>\n- two <img src=x onerror=alert(1)>\n\n```go\nx := 1 < 2\n```\n\n<script>alert(1)</script>"
	outputs := map[string]any{
		"text":   markdownOutput,
		"plain":  "line one\nline <b>two</b>",
		"object": map[string]any{"rows": 12, "source": "a\nb"},
	}
	agent := errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
		return errand.Result{Output: outputs[run.Task().Goal]}, nil
	})
	require.NoError(t, h.client.RegisterAgent("default", agent))
	engine, err := errand.NewEngine(h.client, &errand.EngineConfig{Workers: 2})
	require.NoError(t, err)
	require.NoError(t, engine.Start(t.Context()))
	t.Cleanup(func() { _ = engine.Stop(context.Background()) })
	run := func(goal string) *errand.Task {
		t.Helper()
		task, err := h.client.Submit(t.Context(), &errand.SubmitParams{Goal: goal, Title: "Report"})
		require.NoError(t, err)
		waitEvent(t, h.client, task.ID, "task.completed")
		task, err = h.client.Get(t.Context(), task.ID)
		require.NoError(t, err)
		return task
	}
	writeArtifact := func(id, body string) {
		t.Helper()
		dir := filepath.Join(h.home, "artifacts", id)
		require.NoError(t, os.MkdirAll(dir, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "output.md"), []byte(body), 0o600))
	}

	// A Markdown output is rendered, once, without the HTML it holds.
	text := run("text")
	writeArtifact(text.ID, "# Report\n\n"+markdownOutput+"\n") // as the daemon writes it
	_, page := get(t, b, h.srv.URL+"/tasks/"+text.ID)
	require.Contains(t, page, "<h3>Result</h3>")
	shown := resultPart(t, page) // the event history keeps the raw result
	require.Contains(t, shown, `<div class="markdown"><h2>Findings</h2>`)
	require.Contains(t, shown, "<li>two ")
	require.Contains(t, shown, `<pre><code class="language-go">x := 1 &lt; 2`+"\n</code></pre>")
	for _, live := range []string{"<script", "<img", "onerror", "<b>"} {
		require.NotContains(t, shown, live, "HTML in the output does not reach the page")
	}
	require.NotContains(t, shown, `<pre class="text">`, "a Markdown output is not also shown as text")
	require.NotContains(t, shown, `\n`, "no JSON escapes")
	require.NotContains(t, shown, "&#34;output&#34;", "no raw result JSON")
	require.Equal(t, 1, strings.Count(shown, "Findings"), "the output is shown once")
	require.Contains(t, page, "<h3>Artifact</h3>")
	require.Contains(t, page, "(the result above)")
	require.Contains(t, page, `href="/tasks/`+text.ID+`/artifact" download`)

	// An artifact that differs from the output is shown too.
	writeArtifact(text.ID, "# Report\n\nsomething else\n")
	_, page = get(t, b, h.srv.URL+"/tasks/"+text.ID)
	require.Equal(t, 1, strings.Count(resultPart(t, page), "Findings"))
	require.Contains(t, page, "<pre class=\"text\"># Report\n\nsomething else\n</pre>")
	require.NotContains(t, page, "(the result above)")

	// Plain text stays preformatted, escaped.
	plain := run("plain")
	_, page = get(t, b, h.srv.URL+"/tasks/"+plain.ID)
	shown = resultPart(t, page)
	require.Contains(t, shown, "<pre class=\"text\">line one\nline &lt;b&gt;two&lt;/b&gt;</pre>")
	require.NotContains(t, shown, `class="markdown"`)

	object := run("object")
	_, page = get(t, b, h.srv.URL+"/tasks/"+object.ID)
	require.Contains(t, page, "<pre class=\"json\">{\n  &#34;rows&#34;: 12,\n  &#34;source&#34;: &#34;a\\nb&#34;\n}</pre>")
	require.NotContains(t, resultPart(t, page), "&#34;output&#34;")
}

// resultPart is the part of a task page that shows its result and artifact.
func resultPart(t *testing.T, page string) string {
	t.Helper()
	_, after, ok := strings.Cut(page, `<div class="result">`)
	require.True(t, ok, "no result shown")
	part, _, ok := strings.Cut(after, `<div class="actions">`)
	require.True(t, ok)
	return part
}

func TestResultOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw  string
		want *resultView
	}{
		{``, nil},
		{`null`, nil},
		{`{}`, nil},
		{`{"output":""}`, nil},
		{`{"output":null}`, nil},
		{`{"output":"a\nb","warning":null}`, &resultView{Text: "a\nb"}},
		{`{"output":"done","warning":"cut short"}`, &resultView{Text: "done", More: "{\n  \"warning\": \"cut short\"\n}"}},
		{`{"output":[1,2]}`, &resultView{JSON: "[\n  1,\n  2\n]"}},
		{`{"output":{"a":1}}`, &resultView{JSON: "{\n  \"a\": 1\n}"}},
		{`{"rows":3}`, &resultView{JSON: "{\n  \"rows\": 3\n}"}},
		{`"plain"`, &resultView{Text: "plain"}},
		{`{"output":"# Done\n\n- a\n- b"}`, &resultView{Text: "# Done\n\n- a\n- b", HTML: "<h1>Done</h1>\n<ul>\n<li>a</li>\n<li>b</li>\n</ul>\n"}},
		{`{"output":"see **this**","warning":"cut short"}`, &resultView{Text: "see **this**", HTML: "<p>see <strong>this</strong></p>\n", More: "{\n  \"warning\": \"cut short\"\n}"}},
		{`not json`, &resultView{JSON: "not json"}},
	} {
		require.Equal(t, tc.want, resultOf(json.RawMessage(tc.raw)), tc.raw)
	}
}
