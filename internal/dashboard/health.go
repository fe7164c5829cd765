package dashboard

import (
	"cmp"
	"net/http"
	"slices"
	"strings"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
)

// healthData is the health page.
type healthData struct {
	Status          *api.Status
	Workers         int
	Running, Queued int
	Counts          []statusCount
	Failures        []failureGroup
	FailuresLooked  int
	// Agents is each agent and concurrency key with its tasks, limit and
	// pause.
	Agents *errand.AgentStates
}

type statusCount struct {
	Status errand.Status
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
	for _, st := range errand.AllStatuses {
		data.Counts = append(data.Counts, statusCount{Status: st, N: counts[st]})
	}
	data.Running = counts[errand.StatusRunning]
	data.Queued = counts[errand.StatusPending] + counts[errand.StatusRetryScheduled]
	if data.Agents, err = d.client.Agents(ctx); err != nil {
		d.fail(w, r, v, http.StatusInternalServerError, err.Error())
		return
	}
	failed, err := d.client.List(ctx, &errand.ListParams{Statuses: []errand.Status{errand.StatusFailed}, Limit: failuresLooked})
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

// agentAct pauses or resumes an agent (POST /agents/{name}/pause|resume),
// then goes back to the health page.
func (d *Dashboard) agentAct(w http.ResponseWriter, r *http.Request, v *view) {
	ctx, name := r.Context(), r.PathValue("name")
	var err error
	switch r.PathValue("action") {
	case "pause":
		_, err = d.client.PauseAgent(ctx, name)
	case "resume":
		_, err = d.client.ResumeAgent(ctx, name)
	default:
		d.fail(w, r, v, http.StatusNotFound, "No such action.")
		return
	}
	if err != nil {
		d.fail(w, r, v, actionStatus(err), err.Error())
		return
	}
	http.Redirect(w, r, "/health#agents", http.StatusSeeOther)
}
