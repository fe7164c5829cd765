package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/errandhq/errand/internal/scheduler"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// Escalation: a heartbeat's scout may hand what it found to a capable
// agent (taskrun.DecisionEscalate). When the scout completes, errand makes
// one top-level task per signal for the schedule's escalate_to agent, in
// the transaction that completes the scout, at most max_escalations_per_day
// a day (UTC) per schedule: the store counts them on the schedule's row,
// locked, so two daemons cannot exceed the cap between them. Signals
// beyond the cap are recorded as capped in the scout's decision, and an
// alert says so. The scout's suggested_agent is advisory: recorded in the
// signal, never obeyed. An escalated task's source is schedule:<id>, and its
// input names the scout task ("heartbeat": {"schedule", "scout_task_id"}).

// escalationDay is the layout of the day the daily cap counts, in UTC.
const escalationDay = "2006-01-02"

// escalationRecord is one signal as the scout's decision records it: the
// task made for it, or capped (the day's escalations were used up), or
// refused (the schedule has nowhere to escalate to).
type escalationRecord struct {
	taskrun.Escalation
	TaskID  string `json:"task_id,omitempty"`
	Capped  bool   `json:"capped,omitempty"`
	Refused string `json:"refused,omitempty"`
}

// scoutHeartbeat is the schedule a scout's input names
// ("heartbeat": {"schedule": {"id", "name"}}), as the engine wrote it when
// it fired the scout; nil for a scout submitted otherwise.
func scoutHeartbeat(t *store.Task) *scheduler.ScheduleRef {
	var in struct {
		Heartbeat struct {
			Schedule *scheduler.ScheduleRef `json:"schedule"`
		} `json:"heartbeat"`
	}
	if json.Unmarshal(t.Input, &in) != nil {
		return nil
	}
	return in.Heartbeat.Schedule
}

// escalationPriority is an escalated task's priority by its severity.
func escalationPriority(severity string) int {
	switch severity {
	case taskrun.SeverityCritical:
		return 9
	case taskrun.SeverityHigh:
		return 7
	case taskrun.SeverityLow:
		return 3
	}
	return 5
}

// clip shortens s to at most n bytes on a rune boundary, with an ellipsis.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// escalate plans a scout's escalations in its finish: the tasks for the
// schedule's escalate_to, made (up to the day's cap) by the store in the
// completing transaction, which records the decision (rec, with each
// signal's outcome) as the scout's result and journals it.
func (e *Engine) escalate(ctx context.Context, t *store.Task, d *taskrun.Decision, rec recordedDecision, warning *string, fp *store.TaskFinishParams) error {
	for i := range d.Escalations {
		if err := d.Escalations[i].Check(); err != nil {
			return &taskrun.Error{Code: CodeBadDecision, Err: fmt.Errorf("escalations[%d]: %w", i, err)}
		}
	}
	ref := scoutHeartbeat(t)
	var (
		sc     *store.Schedule
		refuse string
	)
	if ref == nil || ref.ID == "" {
		refuse = "the scout was not fired by a heartbeat schedule"
	} else {
		var err error
		sc, err = e.store.ScheduleGetByID(ctx, ref.ID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			refuse = fmt.Sprintf("heartbeat %s is gone", ref.Name)
		case err != nil:
			return err
		case sc.Escalation == nil:
			refuse = fmt.Sprintf("heartbeat %s has no escalate_to", sc.Name)
		default:
			if err := e.checkAgent(sc.Escalation.To); err != nil {
				refuse = fmt.Sprintf("heartbeat %s escalates to %q: %v", sc.Name, sc.Escalation.To, err)
			}
		}
	}
	actor := store.AgentActor(t.ID)
	var tasks []*store.TaskInsertParams
	if refuse == "" {
		for _, sig := range d.Escalations {
			p, err := e.escalationTask(t, sc, sig)
			if err != nil {
				return &taskrun.Error{Code: CodeBadDecision, Err: fmt.Errorf("escalation: %w", err)}
			}
			tasks = append(tasks, p)
		}
	}
	record := func(made int) (json.RawMessage, []store.EventAppend) {
		r := rec
		r.Escalations = make([]escalationRecord, len(d.Escalations))
		var notMade []string
		for i, sig := range d.Escalations {
			r.Escalations[i] = escalationRecord{Escalation: sig}
			switch {
			case refuse != "":
				r.Escalations[i].Refused = refuse
				notMade = append(notMade, sig.Summary)
			case i < made:
				r.Escalations[i].TaskID = tasks[i].ID
			default:
				r.Escalations[i].Capped = true
				notMade = append(notMade, sig.Summary)
			}
		}
		if sc != nil && sc.Escalation != nil {
			r.EscalateTo = sc.Escalation.To
		}
		out := mustJSON(taskrun.Result{Output: mustJSON(r), Warning: warning})
		events := []store.EventAppend{{Type: store.EventHeartbeatDecision, TaskID: t.ID, Actor: actor, Data: r}}
		for _, a := range r.Alerts {
			events = append(events, store.EventAppend{Type: store.EventAlert, TaskID: t.ID, Actor: actor, Data: &alertData{Message: a}})
		}
		if len(notMade) > 0 {
			var msg string
			if refuse != "" {
				msg = fmt.Sprintf("%d escalation(s) not made: %s", len(notMade), refuse)
			} else {
				msg = fmt.Sprintf("heartbeat %s: %d escalation(s) not made: today's cap of %d (max_escalations_per_day, UTC) is reached",
					sc.Name, len(notMade), sc.Escalation.MaxPerDay)
			}
			msg += ": " + clip(strings.Join(notMade, "; "), 1000)
			events = append(events, store.EventAppend{Type: store.EventAlert, TaskID: t.ID, Actor: actor, Data: &alertData{Message: msg}})
		}
		return out, events
	}
	if refuse != "" {
		fp.Result, fp.Events = record(0)
		return nil
	}
	fp.Escalation = &store.EscalationParams{
		ScheduleID: sc.ID, Day: e.clock.Now().UTC().Format(escalationDay), Max: sc.Escalation.MaxPerDay,
		Tasks: tasks, Record: record,
	}
	return nil
}

// escalationTask is the task one signal makes: for the schedule's
// escalate_to, with the signal and where it came from as its input, under
// the escalation budget (nil: the default), in the scout's session, its
// priority by severity.
func (e *Engine) escalationTask(t *store.Task, sc *store.Schedule, sig taskrun.Escalation) (*store.TaskInsertParams, error) {
	input, err := json.Marshal(map[string]any{
		"escalation": sig,
		"heartbeat":  map[string]any{"schedule": &scheduler.ScheduleRef{ID: sc.ID, Name: sc.Name}, "scout_task_id": t.ID},
	})
	if err != nil {
		return nil, err
	}
	summary := strings.TrimSpace(sig.Summary)
	goal := fmt.Sprintf("Escalation (%s) from heartbeat %s, whose scout (task %s) found something that needs a capable agent: %s\n\n"+
		"The input's \"escalation\" holds the scout's signal (severity, summary, evidence); look into it and act or report.",
		sig.Severity, sc.Name, t.ID, clip(summary, DefaultMaxGoalBytes/2))
	prio := escalationPriority(sig.Severity)
	p := &SubmitParams{
		Goal: goal, Title: clip("Escalation: "+firstLine(summary), maxTitleRunes-1), Agent: sc.Escalation.To, Input: input,
		Priority: &prio, SessionID: t.SessionID, Budget: sc.Escalation.Budget,
		Source: store.SourceSchedule + ":" + sc.ID, Actor: store.AgentActor(t.ID),
	}
	return e.validate(p)
}

// firstLine is s up to its first newline.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
