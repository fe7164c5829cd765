package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/errandhq/errand"
)

// state is a task's state in A2A's lifecycle, whatever the version.
type state int

const (
	stateSubmitted state = iota + 1
	stateWorking
	stateInputRequired
	stateCompleted
	stateFailed
	stateCanceled
)

// terminal reports whether the task has ended for good.
func (s state) terminal() bool {
	return s == stateCompleted || s == stateFailed || s == stateCanceled
}

// settled reports whether a blocking send or a stream stops at s: the
// task ended, or it waits for the client (A2A's "interrupted" states).
func (s state) settled() bool { return s.terminal() || s == stateInputRequired }

// stateOf maps errand's statuses onto A2A's states. A task queued, held
// back by its dependencies or waiting to be retried has not started work
// (submitted); one running or waiting for its subtasks is working. A
// paused task is working too: A2A has no state for a hold, and of its
// states working is the one a client must treat right, as "still in
// progress, keep waiting" — submitted would claim the work never began
// (a task is often paused mid-run), input-required would ask the client
// for an answer errand cannot take while paused, and no terminal state
// fits a task that resumes. The status message and the metadata's
// errand.status say it is paused.
func stateOf(s errand.Status) state {
	switch s {
	case errand.StatusRunning, errand.StatusWaitingSubtasks, errand.StatusPaused:
		return stateWorking
	case errand.StatusInputRequired:
		return stateInputRequired
	case errand.StatusCompleted:
		return stateCompleted
	case errand.StatusFailed:
		return stateFailed
	case errand.StatusCancelled:
		return stateCanceled
	default: // pending, blocked, retry_scheduled
		return stateSubmitted
	}
}

// statusesOf are the errand statuses that map onto s.
func statusesOf(s state) []errand.Status {
	var out []errand.Status
	for _, st := range errand.AllStatuses {
		if stateOf(st) == s {
			out = append(out, st)
		}
	}
	return out
}

type role int

const (
	roleUser role = iota + 1
	roleAgent
)

// part is one piece of a message or artifact: text, or JSON data.
type part struct {
	text   string
	data   json.RawMessage // set for a data part
	isData bool
}

type message struct {
	id        string
	contextID string
	taskID    string
	role      role
	parts     []part
}

type artifact struct {
	id, name string
	parts    []part
	warning  string
	// metadata, when set, is the artifact's metadata as it is.
	metadata json.RawMessage
}

// taskView is what A2A shows of an errand task.
type taskView struct {
	id        string
	contextID string
	state     state
	status    errand.Status
	message   *message // the status message, from the agent
	timestamp time.Time
	artifacts []artifact
	history   []message
	metadata  json.RawMessage
}

// sameStatus reports whether two views say the same of a task's status:
// a stream or a push tells the client only of changes.
func (v *taskView) sameStatus(o *taskView) bool {
	return o != nil && v.state == o.state && v.statusText() == o.statusText()
}

func (v *taskView) statusText() string {
	if v.message == nil || len(v.message.parts) == 0 {
		return ""
	}
	return v.message.parts[0].text
}

// viewOptions say how much of a task to show.
type viewOptions struct {
	history bool
	// historyLength, when ≥ 0, keeps only the most recent messages of
	// the history.
	historyLength int
	artifacts     bool
}

var fullView = viewOptions{history: true, historyLength: -1, artifacts: true}

// contextOf is the A2A context of a task: its session, or, for a task
// submitted without one, its own id.
func contextOf(t *errand.Task) string {
	if t.SessionID != "" {
		return t.SessionID
	}
	return t.ID
}

// view builds what A2A shows of t; it reads the task's questions when it
// needs them (an open question, the history).
func (s *Server) view(ctx context.Context, t *errand.Task, opts viewOptions) (*taskView, error) {
	v := &taskView{
		id: t.ID, contextID: contextOf(t), state: stateOf(t.Status), status: t.Status,
		timestamp: t.UpdatedAt, metadata: taskMetadata(t),
	}
	var inputs []*errand.InputRequest
	if opts.history || t.Status == errand.StatusInputRequired {
		var err error
		if inputs, err = s.client.Inputs(ctx, "", t.ID); err != nil {
			return nil, fmt.Errorf("read the questions of task %s: %w", t.ID, err)
		}
	}
	if text := statusText(t, inputs); text != "" {
		id := "status-" + t.ID + "-" + t.UpdatedAt.UTC().Format("20060102T150405.000000")
		if q := openQuestion(inputs); q != nil && t.Status == errand.StatusInputRequired {
			id = q.ID
		}
		v.message = &message{id: id, contextID: v.contextID, taskID: t.ID, role: roleAgent, parts: []part{{text: text}}}
	}
	if opts.artifacts && t.Status == errand.StatusCompleted && len(t.Result) > 0 {
		v.artifacts = []artifact{resultArtifact(t.Result)}
	}
	if opts.history {
		v.history = history(t, inputs)
		if opts.historyLength >= 0 && len(v.history) > opts.historyLength {
			v.history = v.history[len(v.history)-opts.historyLength:]
		}
	}
	return v, nil
}

func openQuestion(inputs []*errand.InputRequest) *errand.InputRequest {
	for i := len(inputs) - 1; i >= 0; i-- {
		if inputs[i].Status == errand.InputPending {
			return inputs[i]
		}
	}
	return nil
}

// statusText is the status message errand's agent side has for a task:
// its open question, why it failed, what it is doing.
func statusText(t *errand.Task, inputs []*errand.InputRequest) string {
	switch t.Status {
	case errand.StatusInputRequired:
		if q := openQuestion(inputs); q != nil {
			return q.Question
		}
	case errand.StatusFailed, errand.StatusCancelled:
		if t.Error != nil {
			if t.Error.Code == "" || t.Status == errand.StatusCancelled {
				return t.Error.Message
			}
			return t.Error.Code + ": " + t.Error.Message
		}
	case errand.StatusPaused:
		return "Paused by an operator; the task goes on once it is resumed."
	case errand.StatusBlocked:
		return "Waiting for the tasks it depends on: " + strings.Join(t.DependsOn, ", ") + "."
	case errand.StatusWaitingSubtasks:
		return "Waiting for its subtasks to finish."
	case errand.StatusRetryScheduled:
		msg := fmt.Sprintf("Attempt %d failed", t.Attempt)
		if t.Error != nil {
			msg += " (" + t.Error.Code + ": " + t.Error.Message + ")"
		}
		return msg + "; it is tried again at " + t.RunAt.UTC().Format(time.RFC3339) + "."
	case errand.StatusRunning:
		if p := t.Progress; p != nil && (p.Label != "" || p.TotalSteps > 0) {
			if p.TotalSteps > 0 {
				return strings.TrimSpace(fmt.Sprintf("%s (step %d of %d)", p.Label, p.CurrentStep, p.TotalSteps))
			}
			return p.Label
		}
	}
	return ""
}

// resultArtifact is a completed task's result: its output as a text part
// when it is a string, else as a data part.
func resultArtifact(result json.RawMessage) artifact {
	var r struct {
		Output  json.RawMessage `json:"output"`
		Warning *string         `json:"warning"`
	}
	if json.Unmarshal(result, &r) != nil || len(r.Output) == 0 {
		r.Output = result
	}
	a := artifact{id: "result", name: "result"}
	if r.Warning != nil {
		a.warning = *r.Warning
	}
	var text string
	if json.Unmarshal(r.Output, &text) == nil {
		a.parts = []part{{text: text}}
	} else {
		a.parts = []part{{data: compact(r.Output), isData: true}}
	}
	return a
}

// history is the conversation of a task: the message that asked for it,
// then each question its agent asked and the answer it got.
func history(t *errand.Task, inputs []*errand.InputRequest) []message {
	ctxID := contextOf(t)
	first := message{id: originalMessageID(t), contextID: ctxID, taskID: t.ID, role: roleUser, parts: []part{{text: t.Goal}}}
	if in := compact(t.Input); len(in) > 0 && !bytes.Equal(in, []byte(`{}`)) {
		first.parts = append(first.parts, part{data: in, isData: true})
	}
	out := []message{first}
	for _, q := range inputs {
		out = append(out, message{id: q.ID, contextID: ctxID, taskID: t.ID, role: roleAgent, parts: []part{{text: q.Question}}})
		if q.Status == errand.InputAnswered {
			out = append(out, message{id: q.ID + "-answer", contextID: ctxID, taskID: t.ID, role: roleUser, parts: []part{{text: q.Answer}}})
		}
	}
	return out
}

// metadataKey holds, in an errand task's metadata, where an A2A message
// made it.
const metadataKey = "a2a"

// originalMessageID is the messageId of the A2A message that made t, or a
// stable one of t's own when t came from elsewhere.
func originalMessageID(t *errand.Task) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(t.Metadata, &m) == nil {
		var a struct {
			MessageID string `json:"message_id"`
		}
		if json.Unmarshal(m[metadataKey], &a) == nil && a.MessageID != "" {
			return a.MessageID
		}
	}
	return t.ID + "-goal"
}

// taskMetadata is what A2A's task metadata says of errand's task: the
// status A2A's states fold together, and what a client may want to show.
func taskMetadata(t *errand.Task) json.RawMessage {
	m := map[string]any{"status": t.Status, "agent": t.Agent, "title": t.Title}
	if t.Progress != nil {
		m["progress"] = t.Progress
	}
	if t.Error != nil {
		m["error"] = t.Error
	}
	b, _ := json.Marshal(map[string]any{"errand": m})
	return b
}

func compact(raw json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return raw
	}
	return buf.Bytes()
}
