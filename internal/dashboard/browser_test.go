package dashboard

import (
	"context"
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

	client, err := errand.Open(t.Context(), "sqlite://"+filepath.Join(t.TempDir(), "errand.db"), &errand.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	advance := make(chan struct{})
	agent := errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
		switch run.Task().Goal {
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
		case "Chart last quarter's revenue":
			return errand.Result{Output: "chart.png"}, nil
		case "Watch the build queue", "Draft the announcement":
			<-ctx.Done()
			return errand.Result{}, ctx.Err()
		default: // fails on its first attempt
			if run.Task().Attempt <= 1 {
				return errand.Result{}, errand.NonRetryable("upstream_down", errors.New("the weather service answered 503"))
			}
			return errand.Result{Output: "sunny"}, nil
		}
	})
	require.NoError(t, client.RegisterAgent("default", agent))
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

	_, err = client.CreateSchedule(t.Context(), &errand.ScheduleParams{
		Name: "morning-brief", Kind: "cron", Spec: "0 8 * * 1-5", Task: []byte(`{"goal":"Summarise the overnight alerts"}`)})
	require.NoError(t, err)
	run("the other pages",
		chromedp.Navigate(base+"/money"), chromedp.WaitVisible("svg.chart"), shot("money"),
		chromedp.Navigate(base+"/schedules"), chromedp.WaitVisible(`td code`), shot("schedules"),
		chromedp.Navigate(base+"/health"), chromedp.WaitVisible(`table.counts`), shot("health"),
		chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(base+"/"), chromedp.WaitVisible("tbody#rows"), shot("tasks-phone"),
		chromedp.Navigate(base+"/tasks/"+booking), chromedp.WaitVisible(".artifact pre"), shot("task-phone"),
	)

	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, problems, "script errors in the pages:\n%s", strings.Join(problems, "\n"))
	entries, err := os.ReadDir(shots)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(entries), 12)
}
