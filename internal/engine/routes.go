package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// CodeBadDecision is the error of a scout whose decision cannot be carried
// out (an unknown agent, a malformed task).
const CodeBadDecision = "bad_decision"

// maxScoutTasks bounds the tasks one scout decision may start.
const maxScoutTasks = 20

// recordedDecision is the decision as the scout's result keeps it.
type recordedDecision struct {
	Decision string   `json:"decision"`
	Reason   string   `json:"reason"`
	Tasks    []string `json:"tasks"`
	Alerts   []string `json:"alerts,omitempty"`
	// Escalations are the scout's signals, each with the task made for
	// it or why none was; EscalateTo is the agent they went to.
	Escalations []escalationRecord `json:"escalations,omitempty"`
	EscalateTo  string             `json:"escalate_to,omitempty"`
}

// completion adds to a completing task's finish what its role and route
// call for, to be written in the same transaction: a scout's decision
// (its tasks, alerts, escalations and heartbeat.decision event), a chain's follow-up,
// the memory of a memory route.
// An error fails the task: nothing of it is carried out.
func (e *Engine) completion(ctx context.Context, t *store.Task, result taskrun.Result, fp *store.TaskFinishParams) error {
	o := t.Options
	if o == nil {
		return nil
	}
	if o.Scout {
		if err := e.scoutDecision(ctx, t, result, fp); err != nil {
			return err
		}
	}
	if o.ResultRoute == store.ResultRouteChain && o.Chain != nil {
		follow, err := e.followUp(ctx, t, result)
		if err != nil {
			// The task did its work; the follow-up cannot be made as it was
			// asked for (its agent or schedule is gone). Say so and end.
			e.logger.ErrorContext(ctx, "chain: follow-up not submitted", slog.String("task_id", t.ID), slog.String("error", err.Error()))
			return nil
		}
		fp.FollowUps = append(fp.FollowUps, follow)
	}
	if o.ResultRoute == store.ResultRouteMemory {
		if m := e.routeMemory(ctx, t, result); m != nil {
			if m.Flagged == nil && e.reviews() {
				review, err := e.reviewTask(m)
				if err != nil {
					return err
				}
				if follow, err := e.validate(review); err == nil {
					fp.FollowUps = append(fp.FollowUps, follow)
					return nil
				} else {
					// Kept, for a person to look at.
					m.Flagged = &store.MemoryFlag{Reason: "its review could not be submitted: " + err.Error(),
						By: store.MemoryFlaggedByModel, At: e.clock.Now().UTC()}
				}
			}
			fp.Memories = append(fp.Memories, m)
		}
	}
	if o.ResultRoute == store.ResultRouteMemoryReview {
		m, err := e.reviewed(ctx, t, result)
		if err != nil {
			return err
		}
		fp.Memories = append(fp.Memories, m)
	}
	return nil
}

// followUp is the task a chain route submits after t completes.
func (e *Engine) followUp(ctx context.Context, t *store.Task, result taskrun.Result) (*store.TaskInsertParams, error) {
	c := t.Options.Chain
	raw, source := c.Task, t.Options.Source
	if c.Schedule != "" {
		sc, err := e.store.ScheduleGetByName(ctx, c.Schedule)
		if err != nil {
			return nil, fmt.Errorf("schedule %q: %w", c.Schedule, err)
		}
		raw, source = sc.Task, store.SourceSchedule+":"+sc.ID
	}
	tmpl, p, err := e.templateParams(ctx, "result_route.task", raw, c.Schedule != "", 0)
	if err != nil {
		return nil, err
	}
	if tmpl.PromptFile != "" {
		if p.Goal, err = readPrompt("result_route.task.prompt_file", tmpl.PromptFile); err != nil {
			return nil, err
		}
	}
	add := map[string]any{"previous_task_id": t.ID}
	if c.ContextFromResult {
		add["previous_task_output"] = result.Output
	}
	if p.Input, err = mergeInput(p.Input, add); err != nil {
		return nil, err
	}
	if p.SessionID == "" {
		p.SessionID = t.SessionID
	}
	p.Source, p.Actor = source, store.AgentActor(t.ID)
	return e.validate(p)
}

// parseDecision reads a scout's output: a taskrun.Decision object (which
// may name one alert as "alert", as an exec scout may write it), or text
// (a model that answered in words), which decides nothing.
func parseDecision(output json.RawMessage) (*taskrun.Decision, error) {
	output = bytes.TrimSpace(output)
	var d taskrun.Decision
	switch {
	case len(output) == 0 || string(output) == "null":
		d.Decision = taskrun.DecisionNoop
	case output[0] == '"':
		if err := json.Unmarshal(output, &d.Reason); err != nil {
			return nil, err
		}
		d.Decision = taskrun.DecisionNoop
	default:
		var out struct {
			taskrun.Decision
			Alert string `json:"alert"`
		}
		dec := json.NewDecoder(bytes.NewReader(output))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&out); err != nil {
			return nil, fmt.Errorf(`want {"decision": "noop|submit_task|alert|escalate", "reason", "tasks": […], "alerts": […], "escalations": […]}: %w`, err)
		}
		d = out.Decision
		if out.Alert != "" {
			d.Alerts = append(d.Alerts, out.Alert)
		}
	}
	if d.Decision == "" {
		switch {
		case len(d.Escalations) > 0:
			d.Decision = taskrun.DecisionEscalate
		case len(d.Tasks) > 0:
			d.Decision = taskrun.DecisionSubmitTask
		case len(d.Alerts) > 0:
			d.Decision = taskrun.DecisionAlert
		default:
			d.Decision = taskrun.DecisionNoop
		}
	}
	switch d.Decision {
	case taskrun.DecisionNoop:
		if len(d.Tasks) > 0 || len(d.Alerts) > 0 || len(d.Escalations) > 0 {
			return nil, errors.New("a noop starts no task, raises no alert and escalates nothing")
		}
	case taskrun.DecisionEscalate:
		if len(d.Escalations) == 0 {
			return nil, errors.New("escalate needs at least one escalation")
		}
	case taskrun.DecisionSubmitTask:
		if len(d.Tasks) == 0 {
			return nil, errors.New("submit_task needs at least one task")
		}
	case taskrun.DecisionAlert:
		if len(d.Alerts) == 0 {
			return nil, errors.New("alert needs a message")
		}
	default:
		return nil, fmt.Errorf("decision %q is not noop, submit_task, alert or escalate", d.Decision)
	}
	if len(d.Escalations) > 0 && d.Decision != taskrun.DecisionEscalate {
		// escalate takes precedence: a decision that escalates says so.
		return nil, fmt.Errorf("a decision with escalations is escalate, not %s", d.Decision)
	}
	if len(d.Escalations) > taskrun.MaxEscalations {
		return nil, fmt.Errorf("%d escalations; a decision makes at most %d", len(d.Escalations), taskrun.MaxEscalations)
	}
	if len(d.Tasks) > maxScoutTasks {
		return nil, fmt.Errorf("%d tasks; a decision starts at most %d", len(d.Tasks), maxScoutTasks)
	}
	for i, a := range d.Alerts {
		if strings.TrimSpace(a) == "" {
			return nil, fmt.Errorf("alerts[%d] is empty", i)
		}
		if err := checkText(fmt.Sprintf("alerts[%d]", i), a); err != nil {
			return nil, err
		}
	}
	return &d, nil
}

// scoutDecision carries out a scout's decision in its finish: the tasks
// it starts (top-level, any agent) and its alerts, and records it.
func (e *Engine) scoutDecision(ctx context.Context, t *store.Task, result taskrun.Result, fp *store.TaskFinishParams) error {
	d, err := parseDecision(result.Output)
	if err != nil {
		return &taskrun.Error{Code: CodeBadDecision, Err: err}
	}
	rec := recordedDecision{Decision: d.Decision, Reason: d.Reason, Tasks: []string{}, Alerts: d.Alerts}
	for i, raw := range d.Tasks {
		field := fmt.Sprintf("tasks[%d]", i)
		body, err := parseTemplate(field, raw)
		if err == nil && body.PromptFile != "" {
			err = invalid(field+".prompt_file", "belongs to heartbeat schedules")
		}
		var p *SubmitParams
		if err == nil {
			p, err = ParamsFromBody(&body.CreateTask)
		}
		if err == nil && p.ParentID != "" {
			err = invalid(field+".parent_id", "a scout starts top-level tasks")
		}
		if err == nil {
			err = e.checkAgent(p.Agent)
		}
		if err == nil {
			err = e.checkChain(ctx, p, 0)
		}
		var params *store.TaskInsertParams
		if err == nil {
			if p.SessionID == "" {
				p.SessionID = t.SessionID
			}
			p.Source, p.Actor = store.SourceAgent, store.AgentActor(t.ID)
			params, err = e.validate(p)
		}
		if err != nil {
			return &taskrun.Error{Code: CodeBadDecision, Err: fmt.Errorf("%s: %w", field, err)}
		}
		fp.FollowUps = append(fp.FollowUps, params)
		rec.Tasks = append(rec.Tasks, params.ID)
	}
	if len(d.Escalations) > 0 {
		// The store makes them, up to the day's cap, and records the
		// decision with their outcome in the same transaction.
		return e.escalate(ctx, t, d, rec, result.Warning, fp)
	}
	out, err := json.Marshal(taskrun.Result{Output: mustJSON(rec), Warning: result.Warning})
	if err != nil {
		return err
	}
	fp.Result = out
	actor := store.AgentActor(t.ID)
	fp.Events = append(fp.Events, store.EventAppend{Type: store.EventHeartbeatDecision, TaskID: t.ID, Actor: actor, Data: rec})
	for _, a := range d.Alerts {
		fp.Events = append(fp.Events, store.EventAppend{Type: store.EventAlert, TaskID: t.ID, Actor: actor, Data: &alertData{Message: a}})
	}
	return nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only values of this package's own types
	}
	return b
}

// alertData is the payload of an alert event.
type alertData struct {
	Message string `json:"message"`
}
