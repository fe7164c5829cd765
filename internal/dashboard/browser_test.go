package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
)

// chromiumEnv names the Chromium binary the browser test drives; CI sets
// it, so there the test runs or fails, never skips.
const chromiumEnv = "ERRAND_TEST_CHROMIUM"

// screenshotsEnv names the folder the browser test saves a screenshot of
// every page into; a temporary one if unset.
const screenshotsEnv = "ERRAND_DASHBOARD_SCREENSHOTS"

// The dashboard as a person uses it, in headless Chromium: log in, watch a
// task's progress bar move live, answer a question, cancel a task, retry a
// failed one; a screenshot of every page is saved.
func TestDashboardInChromium(t *testing.T) {
	bin := os.Getenv(chromiumEnv)
	if bin == "" {
		t.Skipf("set %s to a Chromium binary (e.g. /usr/bin/chromium) to run the browser test", chromiumEnv)
	}
	shots := os.Getenv(screenshotsEnv)
	if shots == "" {
		shots = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(shots, 0o755))

	// An llm agent whose fake model streams liveReply, held after its
	// first pieces until hold is closed.
	hold := make(chan struct{})
	model := providertest.NewOpenAIServer(t, providertest.Reply{
		Text: liveReply, Hold: hold, HoldAfter: liveHeldPieces,
		ToolCalls: []provider.ToolCall{{ID: "c1", Name: "finish_task", Arguments: json.RawMessage(`{"result":"written"}`)}},
	})
	cfg := filepath.Join(t.TempDir(), "errand.yaml")
	require.NoError(t, os.WriteFile(cfg, fmt.Appendf(nil,
		"agents:\n  streamer: {kind: llm, provider: openai, base_url: %q, model: fake, max_steps: 3}\n", model.URL()), 0o600))
	client, err := errand.Open(t.Context(), "sqlite://"+filepath.Join(t.TempDir(), "errand.db"), &errand.Config{ConfigFile: cfg})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	advance := make(chan struct{})
	holding := make(chan struct{}) // the news monitor holds a reservation
	// paid is what each step of a paying task costs; each reserves a cent
	// more than it costs.
	paid := map[string][]float64{
		"Summarise the supplier contracts": {0.06, 0.05, 0.04},
		"Research competitor pricing":      {0.07, 0.05},
		"Translate the handbook":           {0.04, 0.03},
		"Tag the support tickets":          {0.02, 0.03},
		"Monitor the news feed":            {0.03},
	}
	agent := errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
		goal := run.Task().Goal
		if costs, ok := paid[goal]; ok {
			for n, cost := range costs {
				if _, err := run.PaidStep(ctx, n+1, "model", cost+0.01, func(context.Context, string) (any, float64, error) {
					return "ok", cost, nil
				}); err != nil {
					return errand.Result{}, err
				}
			}
		}
		switch goal {
		case "Write the quarterly report":
			for step := 1; step <= 4; step++ {
				if err := run.Progress(ctx, step, 4, fmt.Sprintf("section %d of 4", step)); err != nil {
					return errand.Result{}, err
				}
				select {
				case <-advance:
				case <-ctx.Done():
					return errand.Result{}, ctx.Err()
				}
			}
			return errand.Result{Output: "report written"}, nil
		case "Book a table for Friday":
			answers, err := run.Answers(ctx)
			if err != nil {
				return errand.Result{}, err
			}
			if len(answers) == 0 {
				return errand.Result{}, errand.AskUser("Which restaurant, and for how many people?")
			}
			return errand.Result{Output: "booked: " + answers[0].Answer}, nil
		case "Plan the product launch":
			plan := []map[string]string{
				{"id": "research", "title": "Research the market", "status": "completed"},
				{"id": "assets", "title": "Prepare the launch assets", "status": "in_progress"},
				{"id": "announce", "title": "Announce it", "status": "pending"},
			}
			if err := run.Checkpoint(ctx, map[string]any{"plan": plan}); err != nil {
				return errand.Result{}, err
			}
			<-ctx.Done()
			return errand.Result{}, ctx.Err()
		case "Draft the weekly digest": // two steps, then done: it is rerun from its second
			for n := 1; n <= 2; n++ {
				if _, err := run.Step(ctx, n, "draft", func(context.Context, string) (any, error) { return n, nil }); err != nil {
					return errand.Result{}, err
				}
			}
			return errand.Result{Output: digestOutput}, nil
		case "Chart last quarter's revenue":
			return errand.Result{Output: "chart.png"}, nil
		case "Monitor the news feed": // holds its next step's reservation until the test ends
			_, err := run.PaidStep(ctx, len(paid[goal])+1, "model", 0.05, func(ctx context.Context, _ string) (any, float64, error) {
				close(holding)
				<-ctx.Done()
				return nil, 0, ctx.Err()
			})
			return errand.Result{}, err
		case "Write the annual review": // does not fit what is left of the day: deferred
			_, err := run.PaidStep(ctx, 1, "model", 0.20, func(context.Context, string) (any, float64, error) {
				return "ok", 0.18, nil
			})
			return errand.Result{}, err
		case "Watch the build queue", "Draft the announcement":
			<-ctx.Done()
			return errand.Result{}, ctx.Err()
		case "Summarise the supplier contracts", "Research competitor pricing", "Translate the handbook", "Tag the support tickets",
			"Sort the shared inbox":
			return errand.Result{Output: "done"}, nil
		default: // fails on its first attempt
			if run.Task().Attempt <= 1 {
				return errand.Result{}, errand.NonRetryable("upstream_down", errors.New("the weather service answered 503"))
			}
			return errand.Result{Output: "sunny"}, nil
		}
	})
	for _, name := range []string{"default", "research", "writer"} {
		require.NoError(t, client.RegisterAgent(name, agent))
	}
	engine, err := errand.NewEngine(client, &errand.EngineConfig{Workers: 8})
	require.NoError(t, err)
	require.NoError(t, engine.Start(t.Context()))
	t.Cleanup(func() { _ = engine.Stop(context.Background()) })
	home := t.TempDir()
	d, err := New(Config{Client: client, Token: testToken, Workers: 8, Home: home})
	require.NoError(t, err)
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)

	submitWith := func(p *errand.SubmitParams) string {
		task, err := client.Submit(t.Context(), p)
		require.NoError(t, err)
		return task.ID
	}
	submit := func(goal string) string { return submitWith(&errand.SubmitParams{Goal: goal}) }
	report, booking, watch, weather := submit("Write the quarterly report"), submit("Book a table for Friday"),
		submit("Watch the build queue"), submit("Check the weather")
	waitEvent(t, client, booking, "task.input_required")
	waitEvent(t, client, weather, "task.failed")

	// A run with a plan, subtasks and dependencies between them.
	launch := submit("Plan the product launch")
	chart := submitWith(&errand.SubmitParams{Goal: "Chart last quarter's revenue", ParentID: launch})
	draft := submitWith(&errand.SubmitParams{Goal: "Draft the announcement", ParentID: launch, DependsOn: []string{chart}})
	submitWith(&errand.SubmitParams{Goal: "Translate the announcement", ParentID: draft, DependsOn: []string{draft}})
	submitWith(&errand.SubmitParams{Goal: "Proofread the announcement", ParentID: launch, DependsOn: []string{draft}})
	waitEvent(t, client, chart, "task.completed")
	waitEvent(t, client, draft, "task.started")

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900))
	alloc, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancelAlloc()
	ctx, cancelCtx := chromedp.NewContext(alloc)
	defer cancelCtx()
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelTimeout()

	// Confirmations are accepted; script errors (a CSP violation among
	// them) fail the test.
	var (
		mu       sync.Mutex
		problems []string
	)
	chromedp.ListenTarget(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *page.EventJavascriptDialogOpening:
			go func() { _ = chromedp.Run(ctx, page.HandleJavaScriptDialog(true)) }()
		case *runtime.EventExceptionThrown:
			mu.Lock()
			problems = append(problems, ev.ExceptionDetails.Error())
			mu.Unlock()
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("console.error %v", ev.Args))
				mu.Unlock()
			}
		}
	})

	shot := func(name string) chromedp.Action {
		return chromedp.ActionFunc(func(ctx context.Context) error {
			var png []byte
			if err := chromedp.FullScreenshot(&png, 100).Do(ctx); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644)
		})
	}
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		require.NoError(t, chromedp.Run(ctx, actions...), what)
	}
	base := srv.URL

	run("log in",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible("#token"),
		shot("login"),
		chromedp.SendKeys("#token", testToken),
		chromedp.Submit("#token"),
		chromedp.WaitVisible("tbody#rows"),
		chromedp.WaitVisible(`a[href="/tasks/`+report+`"]`),
		shot("tasks"),
	)

	run("watch the progress bar move without a reload",
		chromedp.Navigate(base+"/tasks/"+report),
		chromedp.WaitVisible(`#progress[value="25"]`),
	)
	advance <- struct{}{}
	run("progress 50", chromedp.WaitVisible(`#progress[value="50"]`))
	advance <- struct{}{}
	run("progress 75", chromedp.WaitVisible(`#progress[value="75"]`), shot("task"))

	run("answer the question",
		chromedp.Navigate(base+"/queue"),
		chromedp.WaitVisible(`form[action="/tasks/`+booking+`/answer"] textarea`),
		shot("queue"),
		chromedp.SendKeys(`form[action="/tasks/`+booking+`/answer"] textarea`, "Luigi's, four people"),
		chromedp.Click(`form[action="/tasks/`+booking+`/answer"] button`),
		chromedp.WaitVisible(`#status.status-completed`),
	)
	got, err := client.Get(t.Context(), booking)
	require.NoError(t, err)
	require.Contains(t, string(got.Result), "Luigi's, four people")
	// What the daemon writes when a task completes.
	require.NoError(t, os.MkdirAll(filepath.Join(home, "artifacts", booking), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, "artifacts", booking, "output.md"),
		[]byte("# Book a table for Friday\n\nbooked: Luigi's, four people\n"), 0o600))

	run("see a plan, a subtask tree and a dependency graph",
		chromedp.Navigate(base+"/tasks/"+launch),
		chromedp.WaitVisible(`.plan .plan-in_progress`),
		chromedp.WaitVisible(`svg a[href="/tasks/`+draft+`"]`),
		shot("task-tree"),
		chromedp.Click(`svg a[href="/tasks/`+draft+`"]`, chromedp.NodeVisible),
		chromedp.WaitVisible(`.links a[href="/tasks/`+chart+`"]`),
		chromedp.WaitVisible(`path.edge.blocks`),
		shot("task-graph"),
	)

	// The model's words under the running step, as it writes them; the
	// markup in them is shown as text.
	writing := submitWith(&errand.SubmitParams{Goal: "Write the release notes", Agent: "streamer"})
	require.NoError(t, model.WaitHeld(ctx, 1))
	held := strings.Join(providertest.SplitText(liveReply)[:liveHeldPieces], "")
	liveText := `tr[data-step="1.0"] ~ tr.live-row pre.live-text`
	var shown string
	var elements int
	run("see the model's words as they come",
		chromedp.Navigate(base+"/tasks/"+writing),
		chromedp.WaitVisible(liveText),
		chromedp.Poll(fmt.Sprintf(`document.querySelector(%q).textContent === %q`, liveText, held), nil),
		shot("task-live"),
	)
	close(hold)
	run("the rest of the words",
		chromedp.Poll(fmt.Sprintf(`document.querySelector(%q).textContent === %q`, liveText, liveReply), nil),
		chromedp.Text(liveText, &shown),
		chromedp.Evaluate(fmt.Sprintf(`document.querySelector(%q).children.length`, liveText), &elements),
	)
	require.Equal(t, liveReply, shown)
	require.Zero(t, elements, "the text's markup stays text")
	waitEvent(t, client, writing, "task.completed")

	// Rerun a finished task from its second step: the new task opens,
	// names its source and shows its first step as a copy.
	digest := submit("Draft the weekly digest")
	waitEvent(t, client, digest, "task.completed")
	var forkURL string
	run("rerun from here",
		chromedp.Navigate(base+"/tasks/"+digest),
		chromedp.WaitVisible(`tr[data-step="2.0"] form.rerun button`),
		chromedp.Click(`tr[data-step="2.0"] form.rerun button`),
		chromedp.WaitVisible(`dd a[href="/tasks/`+digest+`"]`),
		chromedp.WaitVisible(`#status.status-completed`),
		chromedp.Location(&forkURL),
	)
	forkID := strings.TrimPrefix(forkURL, base+"/tasks/")
	require.NotEqual(t, digest, forkID)
	fork, err := client.Get(t.Context(), forkID)
	require.NoError(t, err)
	require.Equal(t, &errand.ForkRef{TaskID: digest, StepNo: 2}, fork.ForkedFrom)
	run("a fork's copied step",
		chromedp.Reload(),
		chromedp.WaitVisible(`tr[data-step="1.0"] .note a[href="/tasks/`+digest+`"]`),
		shot("task-fork"),
	)
	// The digest's Markdown result is rendered, and the HTML in it is not.
	var rendered struct {
		Items, Code, Live int
		Heading           string
	}
	run("a Markdown result",
		chromedp.Navigate(base+"/tasks/"+digest),
		chromedp.WaitVisible(`.result .markdown h2`),
		chromedp.Evaluate(`({
			Heading: document.querySelector(".result .markdown h2").textContent,
			Items: document.querySelectorAll(".result .markdown li").length,
			Code: document.querySelectorAll(".result .markdown pre code").length,
			Live: document.querySelectorAll(".result img, .result script, .result [onerror], .result [onclick]").length,
		})`, &rendered),
	)
	require.Equal(t, "Weekly digest", rendered.Heading)
	require.Equal(t, 2, rendered.Items)
	require.Equal(t, 1, rendered.Code)
	require.Zero(t, rendered.Live, "the result's HTML stays out of the page")

	run("cancel a running task",
		chromedp.Navigate(base+"/tasks/"+watch),
		chromedp.WaitVisible(`#status.status-running`),
		chromedp.Click(`form[action="/tasks/`+watch+`/cancel"] button`),
		chromedp.WaitVisible(`#status.status-cancelled`),
	)

	run("retry a failed task",
		chromedp.Navigate(base+"/tasks/"+weather),
		chromedp.WaitVisible(`#status.status-failed`),
		shot("task-failed"),
		chromedp.Click(`form[action="/tasks/`+weather+`/retry"] button`),
		chromedp.WaitVisible(`#status.status-completed`),
	)

	// Real spend against a daily limit of $0.50, one paid step after
	// another: $0.42 spent (alerts at 50 % and 80 %), $0.05 held by a
	// running step, and a task whose $0.20 step does not fit what is left.
	_, err = client.SetSpendLimits(t.Context(), errand.SpendLimits{DailyUSD: 0.50, MonthlyUSD: 5,
		AlertThresholds: []float64{0.5, 0.8}, OnLimit: errand.OnLimitPauseAll, Timezone: "UTC"})
	require.NoError(t, err)
	for _, p := range []*errand.SubmitParams{
		{Goal: "Summarise the supplier contracts", Agent: "research"},
		{Goal: "Research competitor pricing", Agent: "research"},
		{Goal: "Translate the handbook", Agent: "writer"},
		{Goal: "Tag the support tickets"},
	} {
		waitEvent(t, client, submitWith(p), "task.completed")
	}
	submitWith(&errand.SubmitParams{Goal: "Monitor the news feed", Agent: "research"})
	select {
	case <-holding:
	case <-time.After(30 * time.Second):
		t.Fatal("the news monitor did not start its held step")
	}
	review := submitWith(&errand.SubmitParams{Goal: "Write the annual review", Agent: "writer"})
	waitEvent(t, client, review, "task.deferred")
	waitEvent(t, client, review, "task.released") // back to pending, to wait for room
	guard, err := client.SpendGuard(t.Context())
	require.NoError(t, err)
	require.InDelta(t, 0.42, guard.SpentDay, 1e-9)
	require.InDelta(t, 0.05, guard.ReservedUSD, 1e-9)
	require.Equal(t, 1, guard.Deferred)
	require.Len(t, guard.AlertsThisPeriod(), 2)

	// Schedules of every overlap policy.
	for _, p := range []*errand.ScheduleParams{
		{Name: "morning-brief", Kind: "cron", Spec: "0 8 * * 1-5", Timezone: "Europe/Berlin", Task: []byte(`{"goal":"Summarise the overnight alerts"}`)},
		{Name: "inbox-sweep", Kind: "interval", Spec: "15m", Overlap: "buffer_one", Task: []byte(`{"goal":"Sort the shared inbox"}`)},
		{Name: "nightly-backup", Kind: "cron", Spec: "0 2 * * *", Overlap: "cancel_previous", Task: []byte(`{"goal":"Back up the wiki"}`)},
		{Name: "on-deploy", Kind: "event", Spec: `{"type":"deploy.finished"}`, Task: []byte(`{"goal":"Smoke-test the deploy"}`)},
		{Name: "weekly-report", Kind: "cron", Spec: "0 9 * * 1", Enabled: new(false), Task: []byte(`{"goal":"Write the weekly report"}`)},
	} {
		_, err = client.CreateSchedule(t.Context(), p)
		require.NoError(t, err)
	}
	swept, err := client.RunSchedule(t.Context(), "inbox-sweep")
	require.NoError(t, err)
	waitEvent(t, client, swept.ID, "task.completed")
	// Memories: two that disagree about one subject (a recall journals the
	// conflict) and one the rules quarantine, released from the page.
	for _, text := range []string{"The wiki backup runs at 02:00", "The wiki backup runs at 03:00 since the move"} {
		_, err = client.Remember(t.Context(), &errand.RememberParams{Text: text, Subject: "wiki backup time"})
		require.NoError(t, err)
	}
	_, err = client.Recall(t.Context(), &errand.RecallParams{Query: "wiki backup"})
	require.NoError(t, err)
	quarantined, err := client.Remember(t.Context(), &errand.RememberParams{Text: injectionText, Category: "observation"})
	require.NoError(t, err)
	require.NotNil(t, quarantined.Flagged)
	run("release a quarantined memory",
		chromedp.Navigate(base+"/memories"), chromedp.WaitVisible(`table.conflicts a[href^="/memories/mem_"]`), shot("memories"),
		chromedp.Click(`a[href="/memories?flagged=true"]`, chromedp.NodeVisible),
		chromedp.WaitVisible(`tr.flagged .badge.quarantined`),
		chromedp.Click(`form[action="/memories/`+quarantined.ID+`/release"] button`),
		chromedp.WaitVisible(`//p[@class="empty" and contains(., "No memory is quarantined.")]`, chromedp.BySearch),
	)
	released, err := client.Memory(t.Context(), quarantined.ID)
	require.NoError(t, err)
	require.Nil(t, released.Flagged)
	run("the other pages",
		chromedp.Navigate(base+"/money"), chromedp.WaitVisible("svg.spend-chart rect.chart-bar"),
		chromedp.WaitVisible("line.chart-limit"), chromedp.WaitVisible("table.alerts"), shot("money"),
		chromedp.Navigate(base+"/schedules"), chromedp.WaitVisible(`td code`), shot("schedules"),
		chromedp.Navigate(base+"/health"), chromedp.WaitVisible(`table.counts`), shot("health"),
		chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(base+"/"), chromedp.WaitVisible("tbody#rows"), shot("tasks-phone"),
		chromedp.Navigate(base+"/tasks/"+booking), chromedp.WaitVisible(".result pre"), shot("task-phone"),
		chromedp.Navigate(base+"/money"), chromedp.WaitVisible("svg.spend-chart rect.chart-bar"), shot("money-phone"),
	)

	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, problems, "script errors in the pages:\n%s", strings.Join(problems, "\n"))
	entries, err := os.ReadDir(shots)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(entries), 16)
}

// digestOutput is the weekly digest's result: Markdown, with HTML that
// must not reach the page.
const digestOutput = "## Weekly digest\n\n- **3** releases shipped <img src=x onerror=alert(1)>\n- `errand` 1.2 is out\n\n" +
	"```sh\nerrand tasks list --status failed\n```\n\n<script>alert(1)</script>\n"
