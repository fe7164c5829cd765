package server

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/scheduler"
	"github.com/errandhq/errand/internal/tasktemplate"
	"github.com/errandhq/errand/store"
)

var (
	templateType  = reflect.TypeFor[tasktemplate.Template]()
	eventSpecType = reflect.TypeFor[scheduler.EventSpec]()
)

// checkScheduleJSON holds the JSON a schedule carries raw (its spec object
// and template) to the rules of the rest of the body: keys in other case
// and keys given twice are malformed, naming the field.
func checkScheduleJSON(spec, task []byte) error {
	if len(spec) > 0 {
		if err := checkKeys(spec, eventSpecType, "spec."); err != nil {
			return err
		}
	}
	if len(task) > 0 {
		return checkKeys(task, templateType, "task.")
	}
	return nil
}

// specText reads a wire spec (a string, or an event's object).
func specText(raw []byte) (string, error) {
	s, err := api.SpecText(raw)
	if err != nil {
		return "", &errand.ValidationError{Field: "spec", Message: strings.TrimPrefix(err.Error(), "spec ")}
	}
	return s, nil
}

// stuckAfter reads a Go duration such as "45m".
func stuckAfter(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, &errand.ValidationError{Field: "stuck_after", Message: fmt.Sprintf("%q is not a duration such as \"45m\"", s)}
	}
	return d, nil
}

// noNull treats a JSON null as absent.
func noNull(raw []byte) []byte {
	if strings.TrimSpace(string(raw)) == "null" {
		return nil
	}
	return raw
}

func (s *Server) createSchedule(w http.ResponseWriter, r *http.Request) {
	var body api.CreateSchedule
	if err := s.decode(w, r, &body, false); err != nil {
		s.fail(w, r, err)
		return
	}
	body.Task = noNull(body.Task)
	if err := checkScheduleJSON(body.Spec, body.Task); err != nil {
		s.fail(w, r, err)
		return
	}
	spec, err := specText(body.Spec)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	stuck, err := stuckAfter(body.StuckAfter)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sc, err := s.client.CreateSchedule(r.Context(), &errand.ScheduleParams{
		Name: body.Name, Kind: body.Kind, Spec: spec, Timezone: body.Timezone, CatchUp: body.CatchUp, Overlap: body.Overlap,
		ActiveHours: body.ActiveHours, Enabled: body.Enabled, Task: body.Task, StuckAfter: stuck,
		EscalateTo: body.EscalateTo, MaxEscalationsPerDay: body.MaxEscalationsPerDay, EscalationBudget: body.EscalationBudget,
	})
	if errors.Is(err, errand.ErrNameTaken) {
		err = fmt.Errorf("%w: a schedule named %q exists; choose another name, or PATCH that one", err, body.Name)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/schedules/"+sc.ID)
	s.writeJSON(w, http.StatusCreated, api.FromSchedule(sc))
}

// defaultSchedulePage is how many schedules a list answers without a
// limit.
const defaultSchedulePage = 100

func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) {
	limit, err := queryLimit(r, defaultSchedulePage)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	scs, next, err := s.client.SchedulePage(r.Context(), r.URL.Query().Get("cursor"), limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, api.ScheduleList{Schedules: api.FromSchedules(scs), NextCursor: next})
}

func (s *Server) getSchedule(w http.ResponseWriter, r *http.Request) {
	sc, err := s.client.Schedule(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, api.FromSchedule(sc))
}

func (s *Server) patchSchedule(w http.ResponseWriter, r *http.Request) {
	var body api.PatchSchedule
	if err := s.decode(w, r, &body, false); err != nil {
		s.fail(w, r, err)
		return
	}
	body.Spec, body.Task = noNull(body.Spec), noNull(body.Task)
	if err := checkScheduleJSON(body.Spec, body.Task); err != nil {
		s.fail(w, r, err)
		return
	}
	patch := &errand.SchedulePatch{
		Enabled: body.Enabled, Timezone: body.Timezone, CatchUp: body.CatchUp, Overlap: body.Overlap,
		ActiveHours: body.ActiveHours, Task: body.Task,
		EscalateTo: body.EscalateTo, MaxEscalationsPerDay: body.MaxEscalationsPerDay, EscalationBudget: body.EscalationBudget,
	}
	if body.Spec != nil {
		spec, err := specText(body.Spec)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		patch.Spec = &spec
	}
	if body.StuckAfter != nil {
		d, err := stuckAfter(*body.StuckAfter)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		patch.StuckAfter = &d
	}
	sc, err := s.client.UpdateSchedule(r.Context(), r.PathValue("id"), patch)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, api.FromSchedule(sc))
}

func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	if err := s.decode(w, r, &struct{}{}, true); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.client.DeleteSchedule(r.Context(), r.PathValue("id")); err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusNoContent)
}

// runSchedule fires a schedule now; its next run does not move.
func (s *Server) runSchedule(w http.ResponseWriter, r *http.Request) {
	if err := s.decode(w, r, &struct{}{}, true); err != nil {
		s.fail(w, r, err)
		return
	}
	t, err := s.client.RunSchedule(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/tasks/"+t.ID)
	s.writeJSON(w, http.StatusCreated, api.ScheduleRun{Task: api.FromTask(t)})
}

// postEvent journals an external event, for event schedules to hear.
func (s *Server) postEvent(w http.ResponseWriter, r *http.Request) {
	var body api.PostEvent
	if err := s.decode(w, r, &body, false); err != nil {
		s.fail(w, r, err)
		return
	}
	if store.IsOwnEventType(body.Type) {
		s.fail(w, r, &errand.ValidationError{Field: "type", Message: fmt.Sprintf(
			"%q is an event type errand writes itself (alert, and every type starting with %s, in any case): post types of your own, such as deploy.finished",
			body.Type, strings.Join(store.OwnEventNamespaces(), ", "))})
		return
	}
	ev, err := s.client.PostEvent(r.Context(), body.Type, noNull(body.Data))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusCreated, api.FromEvent(ev))
}
