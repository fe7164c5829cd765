package dashboard

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/store"
)

// pageTemplates maps each page or fragment to the file that defines it;
// every page file is parsed with the layout.
var pageTemplates = map[string]string{
	"login": "login.html",
	"error": "error.html",
	"tasks": "tasks.html", "rows": "tasks.html",
	"task": "task.html", "task-live": "task.html",
	"queue":     "queue.html",
	"money":     "money.html",
	"schedules": "schedules.html",
	"memories":  "memories.html",
	"health":    "health.html",
}

func (d *Dashboard) parseTemplates() error {
	funcs := template.FuncMap{
		"percent":  percent,
		"age":      age,
		"cost":     func(v float64) string { return fmt.Sprintf("$%.4f", v) },
		"taskCost": taskCost,
		"pretty":   pretty,
		"statuses": func() []store.Status { return store.AllStatuses },
		"ended":    func(s store.Status) bool { return s.Terminal() },
		"title":    taskTitle,
		"add":      func(a, b int) int { return a + b },
		"mul":      func(a, b int) int { return a * b },
		"planMark": planMark,
		"budget":   budgetText,
		"alert":    alertWhat,
		"alertsAt": thresholdsText,
		"held":     heldUSD,
		"share":    shareOf,
		"overlap":  overlapOf,
		"planWord": planWord,
		"conf":     confidenceText,
	}
	d.pages = map[string]*template.Template{}
	for name, file := range pageTemplates {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+file)
		if err != nil {
			return fmt.Errorf("dashboard templates: %w", err)
		}
		d.pages[name] = t
	}
	return nil
}

// tasksData is the task list page: the filters, one page of tasks and the
// cursor of the next.
type tasksData struct {
	Status, Agent, Session string
	Text                   string // in the title or goal, or the id
	Tasks                  []*errand.Task
	Next                   string
	Query                  string // the filters as a query string, for the live refresh
	// After is the journal's last event id when the page was read: the
	// live refresh announces anything written after it.
	After int64
}

// pageSize is how many tasks a list page shows.
const pageSize = 50

func (d *Dashboard) listTasks(r *http.Request) (*tasksData, error) {
	q := r.URL.Query()
	data := &tasksData{Status: q.Get("status"), Agent: q.Get("agent"), Session: q.Get("session"), Text: strings.TrimSpace(q.Get("q"))}
	for _, s := range []string{data.Status, data.Agent, data.Session, data.Text, q.Get("cursor")} {
		if !utf8.ValidString(s) || len(s) > 200 {
			return nil, errors.New("a filter is not valid text")
		}
	}
	after, err := d.client.LastEventID(r.Context()) // before the read: later writes get higher ids
	if err != nil {
		return nil, err
	}
	data.After = after
	p := &errand.ListParams{Agent: data.Agent, SessionID: data.Session, Text: data.Text, Cursor: q.Get("cursor"), Limit: pageSize}
	if data.Status != "" {
		st := store.Status(data.Status)
		if !st.Valid() {
			return nil, fmt.Errorf("there is no status %q", data.Status)
		}
		p.Statuses = []store.Status{st}
	}
	res, err := d.client.List(r.Context(), p)
	if err != nil {
		return nil, err
	}
	data.Tasks, data.Next = res.Tasks, res.NextCursor
	filters := q
	filters.Del("cursor")
	data.Query = filters.Encode()
	return data, nil
}

func (d *Dashboard) tasksPage(w http.ResponseWriter, r *http.Request, v *view) {
	data, err := d.listTasks(r)
	if err != nil {
		d.fail(w, r, v, http.StatusBadRequest, err.Error())
		return
	}
	v.Title, v.Data = "Tasks", data
	d.render(w, r, http.StatusOK, "tasks", v)
}

// taskRows is the list's rows alone, for the live refresh.
func (d *Dashboard) taskRows(w http.ResponseWriter, r *http.Request, v *view) {
	data, err := d.listTasks(r)
	if err != nil {
		d.fail(w, r, v, http.StatusBadRequest, err.Error())
		return
	}
	v.Data, v.Fragment = data, true
	d.render(w, r, http.StatusOK, "rows", v)
}

// taskData is the task page.
type taskData struct {
	After    int64 // see tasksData.After
	Task     *errand.Task
	Plan     []planStep
	Artifact *artifact
	// Result is the task's result as shown; ArtifactSame is set when the
	// artifact holds just that output, so its text is not shown again.
	Result       *resultView
	ArtifactSame bool
	Steps        []*errand.Step
	Events       []*errand.Event
	Inputs       []*errand.InputRequest
	// Tree is the task's run drawn as a tree, when the run has more than
	// this task; Graph its dependencies, when it has any.
	Tree, Graph *diagram
	// DependsOn and NeededBy are the task's edges: what it depends on and
	// what depends on it. BlockedBy is those of DependsOn it waits for.
	DependsOn, NeededBy, BlockedBy []taskLink
}

// planStep is one step of the plan the agent declared (update_plan).
type planStep struct {
	ID, Title string
	Status    string // pending, in_progress or completed
}

// taskLink is a task at the other end of a dependency.
type taskLink struct {
	Task *errand.Task
	Kind string
	// Waiting is set when the link holds the task back: it blocks and
	// has not completed.
	Waiting bool
}

// Bounds of what the task page reads for its drawings: the newest tasks
// of a run (plus the page's task's ancestors), and the tasks nearest in
// its dependency graph.
const (
	maxRunTasks   = maxDiagramTasks
	maxAncestors  = 50
	maxGraphTasks = 100
)

func (d *Dashboard) loadTask(r *http.Request) (*taskData, int, error) {
	ctx, id := r.Context(), r.PathValue("id")
	after, err := d.client.LastEventID(ctx) // before the read: later writes get higher ids
	if err != nil {
		return nil, http.StatusInternalServerError, err
	}
	t, err := d.client.Get(ctx, id)
	if errors.Is(err, errand.ErrNotFound) {
		return nil, http.StatusNotFound, fmt.Errorf("There is no task %s.", id)
	}
	if err != nil {
		return nil, http.StatusInternalServerError, err
	}
	data := &taskData{After: after, Task: t, Plan: planOf(t), Artifact: d.artifactOf(t), Result: resultOf(t.Result)}
	data.ArtifactSame = data.Result != nil && sameArtifact(data.Artifact, t)
	if data.Inputs, err = d.client.Inputs(ctx, "pending", t.ID); err != nil {
		return nil, http.StatusInternalServerError, err
	}
	return data, http.StatusOK, nil
}

// planMark and planWord show a plan step's status.
func planMark(status string) string {
	switch status {
	case "completed":
		return "✓"
	case "in_progress":
		return "▶"
	}
	return "○"
}

func planWord(status string) string {
	switch status {
	case "completed":
		return "done"
	case "in_progress":
		return "current"
	}
	return "to do"
}

// planOf reads a task's plan; one that does not parse is not shown.
func planOf(t *errand.Task) []planStep {
	var plan []planStep
	raw := api.PlanOf(t.Checkpoint)
	if len(raw) == 0 || json.Unmarshal(raw, &plan) != nil {
		return nil
	}
	return plan
}

func (d *Dashboard) taskPage(w http.ResponseWriter, r *http.Request, v *view) {
	data, status, err := d.loadTask(r)
	if err != nil {
		d.fail(w, r, v, status, err.Error())
		return
	}
	ctx, t := r.Context(), data.Task
	for _, load := range []func() error{
		func() (err error) { data.Steps, err = d.client.Steps(ctx, t.ID); return err },
		func() (err error) { data.Events, err = d.client.History(ctx, t.ID); return err },
		func() error {
			tasks, partial, err := d.runOf(ctx, t)
			if err == nil && len(tasks) > 1 {
				data.Tree = treeDiagram(tasks, t.ID)
				data.Tree.Partial = data.Tree.Partial || partial
			}
			return err
		},
		func() error {
			g, err := d.client.DependencyGraph(ctx, t.ID, maxGraphTasks)
			if err == nil && len(g.Edges) > 0 {
				data.Graph = graphDiagram(g, t.ID)
				data.DependsOn, data.NeededBy = linksOf(g, t.ID)
				for _, l := range data.DependsOn {
					if l.Waiting {
						data.BlockedBy = append(data.BlockedBy, l)
					}
				}
			}
			return err
		},
	} {
		if err := load(); err != nil {
			d.fail(w, r, v, http.StatusInternalServerError, err.Error())
			return
		}
	}
	v.Title, v.Data = taskTitle(t), data
	d.render(w, r, http.StatusOK, "task", v)
}

// runOf reads the newest tasks of t's run and t's ancestors, so the tree
// always reaches from its root to t. partial is set when the run has more.
func (d *Dashboard) runOf(ctx context.Context, t *errand.Task) (tasks []*errand.Task, partial bool, err error) {
	run, err := d.client.List(ctx, &errand.ListParams{RunID: t.RunID, Limit: maxRunTasks})
	if err != nil {
		return nil, false, err
	}
	tasks = run.Tasks
	have := make(map[string]bool, len(tasks))
	for _, task := range tasks {
		have[task.ID] = true
	}
	if !have[t.ID] {
		tasks, have[t.ID] = append(tasks, t), true
	}
	for parent, hops := t.ParentID, 0; parent != "" && !have[parent] && hops < maxAncestors; hops++ {
		p, err := d.client.Get(ctx, parent)
		if errors.Is(err, errand.ErrNotFound) {
			break // purged
		}
		if err != nil {
			return nil, false, err
		}
		tasks, have[p.ID] = append(tasks, p), true
		parent = p.ParentID
	}
	return tasks, run.NextCursor != "", nil
}

// linksOf is what taskID depends on and what depends on it, in g.
func linksOf(g *errand.DependencyGraph, taskID string) (dependsOn, neededBy []taskLink) {
	byID := make(map[string]*errand.Task, len(g.Tasks))
	for _, t := range g.Tasks {
		byID[t.ID] = t
	}
	for _, e := range g.Edges {
		switch taskID {
		case e.TaskID:
			blocker := byID[e.DependsOnID]
			dependsOn = append(dependsOn, taskLink{Task: blocker, Kind: e.Kind,
				Waiting: e.Kind == store.DependencyBlocks && blocker.Status != errand.StatusCompleted})
		case e.DependsOnID:
			neededBy = append(neededBy, taskLink{Task: byID[e.TaskID], Kind: e.Kind})
		}
	}
	return dependsOn, neededBy
}

// taskLive is the part of the task page that moves: status, progress,
// consumption, result or error, the open question and the buttons.
func (d *Dashboard) taskLive(w http.ResponseWriter, r *http.Request, v *view) {
	data, status, err := d.loadTask(r)
	if err != nil {
		d.fail(w, r, v, status, err.Error())
		return
	}
	v.Data, v.Fragment = data, true
	d.render(w, r, http.StatusOK, "task-live", v)
}

// act runs one of the task page's buttons and shows the task again.
func (d *Dashboard) act(w http.ResponseWriter, r *http.Request, v *view) {
	ctx, id := r.Context(), r.PathValue("id")
	var err error
	switch r.PathValue("action") {
	case "cancel":
		_, err = d.client.Cancel(ctx, id, "cancelled from the dashboard")
	case "pause":
		_, err = d.client.Pause(ctx, id, true)
	case "resume":
		_, err = d.client.Resume(ctx, id, true)
	case "retry":
		_, err = d.client.Retry(ctx, id)
	case "answer":
		answer := r.PostFormValue("answer")
		if strings.TrimSpace(answer) == "" || !utf8.ValidString(answer) {
			d.fail(w, r, v, http.StatusBadRequest, "The answer is empty or not valid text.")
			return
		}
		_, err = d.client.Answer(ctx, id, answer)
	default:
		d.fail(w, r, v, http.StatusNotFound, "No such action.")
		return
	}
	if err != nil {
		d.fail(w, r, v, actionStatus(err), err.Error())
		return
	}
	http.Redirect(w, r, "/tasks/"+id, http.StatusSeeOther)
}

// actionStatus is the HTTP status of an action's error.
func actionStatus(err error) int {
	var te *errand.TransitionError
	switch {
	case errors.Is(err, errand.ErrNotFound):
		return http.StatusNotFound
	case errors.As(err, &te):
		return http.StatusConflict
	}
	return http.StatusBadRequest
}

// liveThrottle bounds how often a page is told to refresh: a busy task
// writes many events a second, and one refresh shows them all.
const liveThrottle = 250 * time.Millisecond

// live is a Server-Sent Events stream that says "changed" when an event
// of the task (?task=) or of any task is written, at most every
// liveThrottle; the page then fetches what it shows.
func (d *Dashboard) live(w http.ResponseWriter, r *http.Request, _ *view) {
	ctx := r.Context()
	taskID := r.URL.Query().Get("task")
	if !utf8.ValidString(taskID) || len(taskID) > 200 {
		http.Error(w, "bad task id", http.StatusBadRequest)
		return
	}
	// The page says how far into the journal it was read, so nothing
	// written between its render and this connection goes unannounced.
	var after int64
	var err error
	if a := r.URL.Query().Get("after"); a != "" {
		after, err = strconv.ParseInt(a, 10, 64)
		if err != nil || after < 0 {
			http.Error(w, "bad after: want a journal event id", http.StatusBadRequest)
			return
		}
	} else {
		after, err = d.client.LastEventID(ctx)
	}
	if err == nil {
		var sub *errand.Subscription
		if sub, err = d.client.Subscribe(ctx, errand.EventFilter{TaskID: taskID}, after); err == nil {
			defer sub.Close()
			d.stream(w, r, sub)
			return
		}
	}
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

func (d *Dashboard) stream(w http.ResponseWriter, r *http.Request, sub *errand.Subscription) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	send := func(s string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprint(w, s); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send(": live\n\n") {
		return
	}
	keepAlive := d.cfg.Clock.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	var throttle <-chan time.Time
	for {
		select {
		case <-r.Context().Done():
			return
		case _, ok := <-sub.Events():
			if !ok {
				return
			}
			if throttle == nil {
				throttle = d.cfg.Clock.NewTimer(liveThrottle).C()
			}
		case <-throttle:
			throttle = nil
			if !send("event: changed\ndata: \n\n") {
				return
			}
		case <-keepAlive.C():
			if !send(": keep-alive\n\n") {
				return
			}
		}
	}
}

func percent(t *errand.Task) int {
	if t.Status == store.StatusCompleted {
		return 100
	}
	if t.Progress == nil {
		return 0
	}
	return min(max(t.Progress.Percentage, 0), 100)
}

// age is how long ago t was, in one unit.
func age(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := max(now.Sub(t), 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(math.Floor(d.Hours()/24)))
}

func taskCost(t *errand.Task) float64 {
	if t.Consumed == nil {
		return 0
	}
	return t.Consumed.CostUSD
}

func taskTitle(t *errand.Task) string {
	s := cmp.Or(t.Title, t.Goal)
	if r := []rune(s); len(r) > 80 {
		return string(r[:79]) + "…"
	}
	return s
}

// resultView is a task's result for reading: its output as text when it
// is a JSON string (Markdown, say, shown as preformatted text), else as
// indented JSON; and the result's other fields, if any, as indented JSON.
type resultView struct {
	Text string
	JSON string
	More string
}

// resultOf returns the result's view, or nil when it holds nothing to show.
// A result {"output": …} shows its output; anything else is the output.
func resultOf(raw json.RawMessage) *resultView {
	if len(raw) == 0 {
		return nil
	}
	out, v := raw, &resultView{}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) == nil {
		if o, ok := fields["output"]; ok {
			out = o
			delete(fields, "output")
			for k, f := range fields {
				if string(f) == "null" {
					delete(fields, k)
				}
			}
			if len(fields) > 0 {
				rest, err := json.Marshal(fields)
				if err == nil {
					v.More = pretty(rest)
				}
			}
		}
	}
	var s string
	if json.Unmarshal(out, &s) == nil {
		v.Text = s
	} else {
		v.JSON = pretty(out)
	}
	if strings.TrimSpace(v.Text) == "" && v.JSON == "" && v.More == "" {
		return nil
	}
	return v
}

// sameArtifact reports whether a holds only t's output, as the daemon
// writes it (a title heading, then the output): the page then shows the
// output once.
func sameArtifact(a *artifact, t *errand.Task) bool {
	if a == nil {
		return false
	}
	want := "# " + t.Title + "\n\n" + api.ResultText(t.Result) + "\n"
	if a.Cut {
		return strings.HasPrefix(want, a.Text)
	}
	return a.Text == want
}

// pretty indents a JSON document for reading; anything else is shown as
// it is, and null or {} as nothing. The template escapes either.
func pretty(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	if m, ok := v.(map[string]any); v == nil || ok && len(m) == 0 {
		return "" // nothing worth a heading
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the template escapes; \u003c would show as such
	enc.SetIndent("", "  ")
	if enc.Encode(v) != nil {
		return string(raw)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// budgetText is a task's budget as a line: the limits it sets.
func budgetText(b *store.Budget) string {
	var parts []string
	if b.MaxTokens > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens", b.MaxTokens))
	}
	if b.MaxCostUSD > 0 {
		parts = append(parts, fmt.Sprintf("$%.4f", b.MaxCostUSD))
	}
	if b.MaxToolCalls > 0 {
		parts = append(parts, fmt.Sprintf("%d tool calls", b.MaxToolCalls))
	}
	if b.MaxWallClock > 0 {
		parts = append(parts, time.Duration(b.MaxWallClock).String()+" wall clock")
	}
	return strings.Join(parts, " · ")
}

// queueData is the people's queue: questions tasks wait on, and the
// inbox.
type queueData struct {
	Inputs []*errand.InputRequest // the oldest pending questions
	// Waiting is how many tasks wait for an answer, when more than
	// Inputs shows.
	Waiting int
	Inbox   []*errand.Notification // the newest, newest first
	// InboxCut is set when there are older notifications than Inbox shows.
	InboxCut bool
}

// Bounds of the people's queue: questions longest waiting first, the
// inbox newest first.
const (
	queueQuestions = 50
	queueInbox     = 100
)

func (d *Dashboard) queuePage(w http.ResponseWriter, r *http.Request, v *view) {
	ctx := r.Context()
	data := &queueData{}
	inputs, err := d.client.PendingInputs(ctx)
	if err == nil && len(inputs) > queueQuestions {
		var counts map[errand.Status]int
		counts, err = d.client.CountByStatus(ctx)
		data.Waiting = max(counts[errand.StatusInputRequired], len(inputs))
		inputs = inputs[:queueQuestions]
	}
	data.Inputs = inputs
	if err == nil {
		data.Inbox, err = d.client.Inbox(ctx, &errand.InboxParams{Limit: queueInbox, Newest: true})
		slices.Reverse(data.Inbox)
		data.InboxCut = len(data.Inbox) == queueInbox
	}
	if err != nil {
		d.fail(w, r, v, http.StatusInternalServerError, err.Error())
		return
	}
	v.Title, v.Data = "Questions & inbox", data
	d.render(w, r, http.StatusOK, "queue", v)
}

// healthData is the health page.
type healthData struct {
	Status          *api.Status
	Workers         int
	Running, Queued int
	Counts          []statusCount
	Failures        []failureGroup
	FailuresLooked  int
}

type statusCount struct {
	Status store.Status
	N      int
}

type failureGroup struct {
	Code   string
	N      int
	Latest *errand.Task
}

// failuresLooked is how many of the latest failed tasks the health page
// groups by error code.
const failuresLooked = 200

func (d *Dashboard) healthPage(w http.ResponseWriter, r *http.Request, v *view) {
	ctx := r.Context()
	data := &healthData{Workers: d.cfg.Workers}
	if d.cfg.Status != nil {
		st, err := d.cfg.Status(ctx)
		if err != nil {
			d.fail(w, r, v, http.StatusInternalServerError, err.Error())
			return
		}
		data.Status = st
	}
	counts, err := d.client.CountByStatus(ctx)
	if err != nil {
		d.fail(w, r, v, http.StatusInternalServerError, err.Error())
		return
	}
	for _, st := range store.AllStatuses {
		data.Counts = append(data.Counts, statusCount{Status: st, N: counts[st]})
	}
	data.Running = counts[store.StatusRunning]
	data.Queued = counts[store.StatusPending] + counts[store.StatusRetryScheduled]
	failed, err := d.client.List(ctx, &errand.ListParams{Statuses: []store.Status{store.StatusFailed}, Limit: failuresLooked})
	if err != nil {
		d.fail(w, r, v, http.StatusInternalServerError, err.Error())
		return
	}
	data.FailuresLooked = len(failed.Tasks)
	byCode := map[string]*failureGroup{}
	for _, t := range failed.Tasks { // newest first
		code := "unknown"
		if t.Error != nil && t.Error.Code != "" {
			code = t.Error.Code
		}
		g := byCode[code]
		if g == nil {
			g = &failureGroup{Code: code, Latest: t}
			byCode[code] = g
		}
		g.N++
	}
	for _, g := range byCode {
		data.Failures = append(data.Failures, *g)
	}
	slices.SortFunc(data.Failures, func(a, b failureGroup) int { return cmp.Or(b.N-a.N, strings.Compare(a.Code, b.Code)) })
	v.Title, v.Data = "Health", data
	d.render(w, r, http.StatusOK, "health", v)
}

// moneyData is the money page: what errand budget shows, spend per day
// and per hour, and where the money went.
type moneyData struct {
	Guard *errand.SpendGuard
	Bars  []spendBar
	// State is the guard's: open, paused, or paused then resumed.
	State  string
	Alerts []store.FiredAlert // of this day and month, oldest first
	// Zone is the guard's time zone: its days, hours and alerts are
	// shown in it.
	Zone        *time.Location
	Days, Hours *spendChart
	Running     []*errand.Task
	TopTasks    []*errand.Task
	TopAgents   []agentSpend
	Looked      int
}

// spendBar is one bar of the chart: spent against a limit, Width of 400.
type spendBar struct {
	Label        string
	Spent, Limit float64
	Width        int
	Over         bool // the limit is reached
}

type agentSpend struct {
	Agent string
	Tasks int
	Spent float64
}

// moneyLooked is how many of the latest tasks the most expensive lists
// are drawn from.
const moneyLooked = 1000

func barOf(label string, spent, limit float64) spendBar {
	b := spendBar{Label: label, Spent: spent, Limit: limit, Over: limit > 0 && spent >= limit-1e-12}
	switch {
	case limit > 0:
		b.Width = int(math.Round(min(spent/limit, 1) * 400))
	case spent > 0:
		b.Width = 400
	}
	return b
}

// alertWhat names what an alert says: the share of the daily or monthly
// limit spend crossed, or that the limit was reached.
func alertWhat(a store.FiredAlert) string {
	limit := "daily limit"
	if a.Period == store.PeriodMonth {
		limit = "monthly limit"
	}
	if a.Threshold >= 1 {
		return limit + " reached"
	}
	return fmt.Sprintf("%.0f%% of the %s", a.Threshold*100, limit)
}

// thresholdsText lists the shares of a limit the guard alerts at; the
// limit itself always alerts.
func thresholdsText(ts []float64) string {
	var parts []string
	for _, t := range ts {
		if t < 1 {
			parts = append(parts, fmt.Sprintf("%.0f%%", t*100))
		}
	}
	return strings.Join(append(parts, "the limit"), ", ")
}

func (d *Dashboard) moneyPage(w http.ResponseWriter, r *http.Request, v *view) {
	ctx := r.Context()
	guard, err := d.client.SpendGuard(ctx)
	if err != nil {
		d.fail(w, r, v, http.StatusInternalServerError, err.Error())
		return
	}
	zone, err := store.SpendLocation(&guard.Limits)
	if err != nil {
		zone = time.UTC // as the guard counts
	}
	data := &moneyData{Guard: guard, State: guard.StateName(), Alerts: guard.AlertsThisPeriod(), Zone: zone, Bars: []spendBar{
		barOf("Today", guard.SpentDay, guard.Limits.DailyUSD),
		barOf("This month", guard.SpentMonth, guard.Limits.MonthlyUSD),
	}}
	history, err := d.client.SpendHistory(ctx, chartDays)
	if err != nil {
		d.fail(w, r, v, http.StatusInternalServerError, err.Error())
		return
	}
	data.Days, data.Hours = dayChart(history.Days, guard.Limits.DailyUSD), hourChart(history.Hours)
	running, err := d.client.List(ctx, &errand.ListParams{Statuses: []store.Status{store.StatusRunning}, Limit: 200})
	if err != nil {
		d.fail(w, r, v, http.StatusInternalServerError, err.Error())
		return
	}
	data.Running = running.Tasks
	slices.SortStableFunc(data.Running, func(a, b *errand.Task) int {
		return cmp.Compare(taskCost(b)+heldUSD(b), taskCost(a)+heldUSD(a))
	})

	latest, err := d.client.List(ctx, &errand.ListParams{Limit: moneyLooked})
	if err != nil {
		d.fail(w, r, v, http.StatusInternalServerError, err.Error())
		return
	}
	data.Looked = len(latest.Tasks)
	agents := map[string]*agentSpend{}
	for _, t := range latest.Tasks {
		c := taskCost(t)
		if c <= 0 {
			continue
		}
		data.TopTasks = append(data.TopTasks, t)
		a := agents[t.Agent]
		if a == nil {
			a = &agentSpend{Agent: t.Agent}
			agents[t.Agent] = a
		}
		a.Tasks++
		a.Spent += c
	}
	slices.SortStableFunc(data.TopTasks, func(a, b *errand.Task) int { return cmp.Compare(taskCost(b), taskCost(a)) })
	data.TopTasks = data.TopTasks[:min(len(data.TopTasks), 10)]
	for _, a := range agents {
		data.TopAgents = append(data.TopAgents, *a)
	}
	slices.SortFunc(data.TopAgents, func(a, b agentSpend) int {
		return cmp.Or(cmp.Compare(b.Spent, a.Spent), strings.Compare(a.Agent, b.Agent))
	})
	v.Title, v.Data = "Money", data
	d.render(w, r, http.StatusOK, "money", v)
}

// heldUSD is what a running task holds reserved for the step it runs.
func heldUSD(t *errand.Task) float64 {
	if t.Reserved == nil {
		return 0
	}
	return t.Reserved.CostUSD
}

// shareOf is spent as a whole percentage of limit, or "" without a limit.
func shareOf(spent, limit float64) string {
	if limit <= 0 {
		return ""
	}
	return fmt.Sprintf("%.0f%%", 100*spent/limit)
}

// schedulesData is one page of the schedules, by name.
type schedulesData struct {
	Schedules []*errand.Schedule
	// Cursor is the name this page starts after ("" on the first); Next
	// the cursor of the following page, "" on the last.
	Cursor, Next string
}

// schedulePageSize is how many schedules a page shows.
const schedulePageSize = 50

// maxScheduleCursor bounds a cursor, a schedule's name: errand's names
// are at most 100 bytes, imported ones may be longer.
const maxScheduleCursor = 1000

// scheduleCursor reads the schedules page's query: only cursor, once, a
// schedule name (text with no control characters).
func scheduleCursor(q url.Values) (string, error) {
	for k, vs := range q {
		if k != "cursor" {
			return "", fmt.Errorf("the schedules page takes no %q parameter, only cursor", k)
		}
		if len(vs) > 1 {
			return "", errors.New("give one cursor")
		}
	}
	c := q.Get("cursor")
	if !validCursor(c) {
		return "", errors.New("the cursor is not a schedule name")
	}
	return c, nil
}

// validCursor reports whether c could be a schedule's name, or is empty.
func validCursor(c string) bool {
	return len(c) <= maxScheduleCursor && utf8.ValidString(c) && !strings.ContainsFunc(c, unicode.IsControl)
}

// overlapOf is the overlap policy a schedule fires with: a stored empty
// one is its kind's default.
func overlapOf(s *errand.Schedule) string {
	switch {
	case s.Overlap != "":
		return s.Overlap
	case s.Kind == store.ScheduleEvent:
		return store.OverlapAllowAll
	}
	return store.OverlapSkip
}

func (d *Dashboard) schedulesPage(w http.ResponseWriter, r *http.Request, v *view) {
	cursor, err := scheduleCursor(r.URL.Query())
	if err != nil {
		d.fail(w, r, v, http.StatusBadRequest, err.Error())
		return
	}
	data := &schedulesData{Cursor: cursor}
	data.Schedules, data.Next, err = d.client.SchedulePage(r.Context(), cursor, schedulePageSize)
	if err != nil {
		d.fail(w, r, v, http.StatusInternalServerError, err.Error())
		return
	}
	v.Title, v.Data = "Schedules", data
	d.render(w, r, http.StatusOK, "schedules", v)
}

// scheduleAct enables, disables or runs a schedule now.
func (d *Dashboard) scheduleAct(w http.ResponseWriter, r *http.Request, v *view) {
	ctx, id := r.Context(), r.PathValue("id")
	switch action := r.PathValue("action"); action {
	case "enable", "disable":
		enabled := action == "enable"
		if _, err := d.client.UpdateSchedule(ctx, id, &errand.SchedulePatch{Enabled: &enabled}); err != nil {
			d.fail(w, r, v, actionStatus(err), err.Error())
			return
		}
		// Back to the page the button was on.
		back := "/schedules"
		if c := r.PostFormValue("cursor"); c != "" && validCursor(c) {
			back += "?" + url.Values{"cursor": {c}}.Encode()
		}
		http.Redirect(w, r, back, http.StatusSeeOther)
	case "run":
		task, err := d.client.RunSchedule(ctx, id)
		if err != nil {
			d.fail(w, r, v, actionStatus(err), err.Error())
			return
		}
		http.Redirect(w, r, "/tasks/"+task.ID, http.StatusSeeOther)
	default:
		d.fail(w, r, v, http.StatusNotFound, "No such action.")
	}
}
