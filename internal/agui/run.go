package agui

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/errandhq/errand/internal/live"
	"github.com/errandhq/errand/store"
)

// Run turns what one errand task does into the AG-UI events of one run.
// Its methods are fed the task's live output, its step records and its
// status changes in the order the task's subscription delivers them; each
// returns the events to send, already in an order a client accepts (every
// message and step closed before the run ends, nothing after the end).
// A Run is not safe for concurrent use.
type Run struct {
	threadID, runID, taskID string

	// step is the errand step now open as an AG-UI step; 0 when none.
	step int
	// calls holds the text of each call that has streamed this run.
	calls map[callKey]*callText
	// done lists the calls whose record said done: a piece of one that
	// arrives late repeats text already sent.
	done map[callKey]bool
	// attempts counts how often a call was run again after it failed, so
	// each run of it is a message of its own.
	attempts map[callKey]int
	// asked is the tool call of the last question the task asked.
	asked string
	// state is the last snapshot sent.
	state []byte
	ended bool
}

type callKey struct{ step, call int }

// callText is the text of one call sent so far.
type callText struct {
	id   string
	sent strings.Builder
	// runes counts the code points sent, the unit of live.Delta.Offset.
	runes int
	open  bool
}

// NewRun returns the run of task taskID that a client asked for with
// threadID and runID.
func NewRun(threadID, runID, taskID string) *Run {
	return &Run{threadID: threadID, runID: runID, taskID: taskID,
		calls: map[callKey]*callText{}, done: map[callKey]bool{}, attempts: map[callKey]int{}}
}

// Ended reports whether the run has sent its last event.
func (r *Run) Ended() bool { return r.ended }

// Start is the run's first event.
func (r *Run) Start() []Event {
	return []Event{&RunStarted{Type: TypeRunStarted, ThreadID: r.threadID, RunID: r.runID}}
}

// MessageID is the id of the text message of a call of a step: the same in
// every run that shows it, so a frontend that follows a task again keeps
// one message per call.
func (r *Run) MessageID(step, call int) string {
	id := fmt.Sprintf("msg-%s-%d-%d", r.taskID, step, call)
	if n := r.attempts[callKey{step, call}]; n > 0 {
		id += fmt.Sprintf("-r%d", n)
	}
	return id
}

// ToolCallID is the id of the tool call a step record is.
func (r *Run) ToolCallID(step, call int) string {
	id := fmt.Sprintf("call-%s-%d-%d", r.taskID, step, call)
	if n := r.attempts[callKey{step, call}]; n > 0 {
		id += fmt.Sprintf("-r%d", n)
	}
	return id
}

func stepName(n int) string { return fmt.Sprintf("step %d", n) }

// enter opens errand step n as an AG-UI step, closing the one before.
func (r *Run) enter(n int) []Event {
	if r.step == n {
		return nil
	}
	out := r.leave()
	r.step = n
	return append(out, &StepStarted{Type: TypeStepStarted, StepName: stepName(n)})
}

// leave closes the open step and the messages still open in it.
func (r *Run) leave() []Event {
	out := r.closeMessages(func(k callKey) bool { return k.step == r.step })
	if r.step != 0 {
		out = append(out, &StepFinished{Type: TypeStepFinished, StepName: stepName(r.step)})
		r.step = 0
	}
	return out
}

// closeMessages ends the open messages of the calls which selects, in
// call order.
func (r *Run) closeMessages(which func(callKey) bool) []Event {
	var keys []callKey
	for k, c := range r.calls {
		if c.open && which(k) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b callKey) int { return cmp.Or(cmp.Compare(a.step, b.step), cmp.Compare(a.call, b.call)) })
	out := make([]Event, 0, len(keys))
	for _, k := range keys {
		c := r.calls[k]
		c.open = false
		out = append(out, &TextMessageEnd{Type: TypeTextMessageEnd, MessageID: c.id})
	}
	return out
}

// send appends the part of text, which starts at code point offset of the
// call's text, that the client has not seen yet.
func (r *Run) send(k callKey, offset int, text string) []Event {
	c := r.calls[k]
	if c == nil {
		c = &callText{id: r.MessageID(k.step, k.call)}
		r.calls[k] = c
	}
	if offset > c.runes {
		// Pieces went missing (this client fell behind); the record
		// fills the gap when the call ends.
		return nil
	}
	skip := c.runes - offset
	i := 0
	for ; skip > 0 && i < len(text); skip-- {
		_, size := utf8.DecodeRuneInString(text[i:])
		i += size
	}
	rest := text[i:]
	if rest == "" {
		return nil
	}
	var out []Event
	if !c.open {
		if c.runes > 0 {
			return nil // closed already: the text is complete
		}
		c.open = true
		out = append(out, &TextMessageStart{Type: TypeTextMessageStart, MessageID: c.id, Role: "assistant"})
	}
	c.sent.WriteString(rest)
	c.runes += utf8.RuneCountInString(rest)
	return append(out, &TextMessageContent{Type: TypeTextMessageContent, MessageID: c.id, Delta: rest})
}

// Delta is a piece of live output.
func (r *Run) Delta(d live.Delta) []Event {
	k := callKey{d.StepNo, d.CallIndex}
	if r.ended || r.done[k] || d.Text == "" || d.StepNo < 1 || d.Offset < 0 {
		return nil
	}
	out := r.enter(d.StepNo)
	return append(out, r.send(k, d.Offset, d.Text)...)
}

// StepEnded is the record of a call that ended (the task.step event): the
// end of its text message, with the text the record holds beyond what
// streamed (all of it when nothing streamed), and, for a tool call, the
// call and its result.
func (r *Run) StepEnded(rec *store.Step) []Event {
	if r.ended || rec == nil || rec.StepNo < 1 || rec.Status == store.StepRunning {
		return nil
	}
	k := callKey{rec.StepNo, rec.CallIndex}
	if r.done[k] {
		return nil
	}
	out := r.enter(rec.StepNo)
	if text := RecordText(rec); text != "" {
		sent := ""
		if c := r.calls[k]; c != nil {
			sent = c.sent.String()
		}
		if rest, ok := strings.CutPrefix(text, sent); ok {
			out = append(out, r.send(k, utf8.RuneCountInString(sent), rest)...)
		}
	}
	if c := r.calls[k]; c != nil && c.open {
		c.open = false
		out = append(out, &TextMessageEnd{Type: TypeTextMessageEnd, MessageID: c.id})
	}
	out = append(out, r.toolCall(rec)...)
	if rec.Status == store.StepDone {
		r.done[k] = true
	} else {
		// A failed call runs again in a later attempt: as a new message.
		delete(r.calls, k)
		r.attempts[k]++
	}
	return out
}

// toolCall is the AG-UI tool call a tool, question or subtask record is.
func (r *Run) toolCall(rec *store.Step) []Event {
	switch rec.Type {
	case store.StepToolCall, store.StepHumanInput, store.StepSubTask:
	default:
		return nil
	}
	id := r.ToolCallID(rec.StepNo, rec.CallIndex)
	name := rec.Tool
	if name == "" {
		name = rec.Type
	}
	out := []Event{&ToolCallStart{Type: TypeToolCallStart, ToolCallID: id, ToolCallName: name,
		ParentMessageID: r.MessageID(rec.StepNo, 0)}}
	if len(rec.Input) > 0 {
		out = append(out, &ToolCallArgs{Type: TypeToolCallArgs, ToolCallID: id, Delta: string(rec.Input)})
	}
	out = append(out, &ToolCallEnd{Type: TypeToolCallEnd, ToolCallID: id})
	if rec.Type == store.StepHumanInput && rec.Status == store.StepDone {
		// Its result is the person's answer: the interrupt that follows
		// asks for it, and the next run's resume carries it.
		r.asked = id
		return out
	}
	return append(out, &ToolCallResult{Type: TypeToolCallResult, MessageID: "res-" + strings.TrimPrefix(id, "call-"),
		ToolCallID: id, Content: resultContent(rec), Role: "tool"})
}

// RecordText is the text a model call's record holds: the reply's
// content. Other records hold no message text.
func RecordText(rec *store.Step) string {
	if rec.Type != store.StepLLMCall || len(rec.Output) == 0 {
		return ""
	}
	var reply struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(rec.Output, &reply) != nil {
		return ""
	}
	return reply.Content
}

// resultContent is what a tool call returned, as text: a JSON string
// unquoted, any other JSON as it is; the error when it returned nothing.
func resultContent(rec *store.Step) string {
	if len(rec.Output) > 0 {
		var s string
		if json.Unmarshal(rec.Output, &s) == nil {
			return s
		}
		return string(rec.Output)
	}
	if rec.ErrorMessage != "" {
		b, _ := json.Marshal(map[string]string{"error": rec.ErrorMessage})
		return string(b)
	}
	return rec.Status
}

// Snapshot is a STATE_SNAPSHOT of state, when it differs from the last one
// sent.
func (r *Run) Snapshot(state json.RawMessage) []Event {
	if r.ended || len(state) == 0 || bytes.Equal(state, r.state) {
		return nil
	}
	r.state = bytes.Clone(state)
	return []Event{&StateSnapshot{Type: TypeStateSnapshot, Snapshot: r.state}}
}

// end closes what is open and sends last, the run's final event.
func (r *Run) end(last Event) []Event {
	if r.ended {
		return nil
	}
	out := r.leave()
	// Messages of calls whose step was left already are closed; any
	// other still open (a step number seen out of order) is closed here.
	out = append(out, r.closeMessages(func(callKey) bool { return true })...)
	r.ended = true
	return append(out, last)
}

// Completed ends the run with the task's result: its output (a result
// that is not an {"output": …} object as it is), a warning in the
// metadata.
func (r *Run) Completed(result json.RawMessage) []Event {
	var parts struct {
		Output  json.RawMessage `json:"output"`
		Warning *string         `json:"warning"`
	}
	var meta map[string]any
	if json.Unmarshal(result, &parts) == nil && len(parts.Output) > 0 {
		result = parts.Output
		if parts.Warning != nil && *parts.Warning != "" {
			meta = map[string]any{"errand": map[string]any{"task_id": r.taskID, "warning": *parts.Warning}}
		}
	}
	if bytes.Equal(bytes.TrimSpace(result), []byte("null")) {
		result = nil
	}
	return r.end(&RunFinished{Type: TypeRunFinished, ThreadID: r.threadID, RunID: r.runID,
		Result: result, Outcome: &Outcome{Type: OutcomeSuccess}, Metadata: meta})
}

// Failed ends the run with the task's error.
func (r *Run) Failed(e *store.TaskError) []Event {
	msg, code := "the task failed", "task_failed"
	if e != nil {
		msg, code = e.Message, e.Code
	}
	return r.Error(code, msg)
}

// Error ends the run with an error errand met while following the task.
func (r *Run) Error(code, message string) []Event {
	if message == "" {
		message = code
	}
	return r.end(&RunError{Type: TypeRunError, Message: message, Code: code})
}

// Cancelled ends the run of a task someone cancelled: stopped, not failed.
func (r *Run) Cancelled(reason string) []Event {
	meta := map[string]any{"task_id": r.taskID}
	if reason != "" {
		meta["reason"] = reason
	}
	return r.end(&RunFinished{Type: TypeRunFinished, ThreadID: r.threadID, RunID: r.runID,
		Outcome: &Outcome{Type: OutcomeCancelled}, Metadata: map[string]any{"errand": meta}})
}

// Question is an open question of the task.
type Question struct {
	RequestID string
	Text      string
	Context   json.RawMessage
}

// InterruptReason is the reason of the interrupt a task's question is.
const InterruptReason = "input_required"

// answerSchema says the answer is text.
var answerSchema = json.RawMessage(`{"type":"string"}`)

// Interrupted ends the run waiting for the answer to the task's question:
// the interrupt's id is the question's request id, which a following
// run's resume entry names.
func (r *Run) Interrupted(q Question) []Event {
	meta := map[string]any{"task_id": r.taskID}
	if len(q.Context) > 0 && !bytes.Equal(q.Context, []byte("null")) {
		meta["context"] = q.Context
	}
	in := &Interrupt{ID: q.RequestID, Reason: InterruptReason, Message: q.Text, ToolCallID: r.asked,
		ResponseSchema: answerSchema, Metadata: map[string]any{"errand": meta}}
	return r.end(&RunFinished{Type: TypeRunFinished, ThreadID: r.threadID, RunID: r.runID,
		Outcome: &Outcome{Type: OutcomeInterrupt, Interrupts: []*Interrupt{in}}})
}
