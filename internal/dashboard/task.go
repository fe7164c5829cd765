package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/store"
)

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
	// Forks are the ids of the tasks forked from this one.
	Forks []string
}

// copiedSteps are the steps a fork copied and what they cost where they
// ran: shown, never counted in the fork's own consumption.
type copiedSteps struct {
	Steps   int
	CostUSD float64
}

// Copied is what the task copied as a fork; nil when it copied nothing.
func (d *taskData) Copied() *copiedSteps {
	var c copiedSteps
	for i, s := range d.Steps {
		if s.CopiedFrom == "" {
			continue
		}
		if d.FirstOfStep(i) {
			c.Steps++
		}
		c.CostUSD += s.CostUSD
	}
	if c.Steps == 0 {
		return nil
	}
	return &c
}

// FirstOfStep reports whether Steps[i] is the first record of its step
// number: the row that offers "Rerun from here" for the step.
func (d *taskData) FirstOfStep(i int) bool {
	return i == 0 || d.Steps[i-1].StepNo != d.Steps[i].StepNo
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
	// maxListedForks bounds the forks the page links to: the newest.
	maxListedForks = 100
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
			forks, err := d.client.List(ctx, &errand.ListParams{ForkedFrom: t.ID, Limit: maxListedForks})
			if err == nil {
				for i := len(forks.Tasks) - 1; i >= 0; i-- { // oldest first
					data.Forks = append(data.Forks, forks.Tasks[i].ID)
				}
			}
			return err
		},
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
	case "fork":
		d.fork(w, r, v)
		return
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
	var (
		te *errand.TransitionError
		ve *errand.ValidationError
	)
	switch {
	case errors.Is(err, errand.ErrNotFound):
		return http.StatusNotFound
	case errors.As(err, &te), errors.Is(err, store.ErrInputClosed):
		return http.StatusConflict // the task or its question moved on
	case errors.As(err, &ve) && ve.Unprocessable:
		return http.StatusUnprocessableEntity
	}
	return http.StatusBadRequest
}

// fork is a step's "Rerun from here": a new task that replays the steps
// before from_step and runs live from it, with the goal and answer the
// form changes (blank keeps the source's). The browser is sent to it.
func (d *Dashboard) fork(w http.ResponseWriter, r *http.Request, v *view) {
	n, err := strconv.Atoi(r.PostFormValue("from_step"))
	if err != nil || n < 1 {
		d.fail(w, r, v, http.StatusBadRequest, "The step to rerun from is missing or not a step number.")
		return
	}
	p := &errand.ForkParams{FromStep: n}
	goal, answer := r.PostFormValue("goal"), r.PostFormValue("answer")
	if !utf8.ValidString(goal) || !utf8.ValidString(answer) {
		d.fail(w, r, v, http.StatusBadRequest, "The new goal or answer is not valid text.")
		return
	}
	if strings.TrimSpace(goal) != "" {
		p.Goal = goal
	}
	if strings.TrimSpace(answer) != "" {
		p.Answer = &answer
	}
	t, err := d.client.Fork(r.Context(), r.PathValue("id"), p)
	if err != nil {
		d.fail(w, r, v, actionStatus(err), err.Error())
		return
	}
	http.Redirect(w, r, "/tasks/"+t.ID, http.StatusSeeOther)
}
