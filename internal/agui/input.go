package agui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Input is what errand takes of a RunAgentInput, the body a client posts to
// start a run. The protocol's objects are open: a key errand does not read
// is let through, but every key it reads must have the type the schema
// gives it, and a failure names the key (messages[2].content).
type Input struct {
	ThreadID string
	RunID    string
	// Messages are the conversation as the client has it.
	Messages []Message
	// Context is what the application told the agent for this run.
	Context []ContextItem
	// Errand is forwardedProps.errand: which task to follow, which agent to
	// start one with, an answer to the task's question.
	Errand Props
	// Resume answers the interrupt the previous run ended with.
	Resume []ResumeEntry
}

// Message is one message of the conversation. Text is its content as
// text: a user message's string, or its text parts joined by blank lines;
// an assistant, system or developer message's string. Errand reads no
// other message's content.
type Message struct {
	ID   string
	Role string
	Text string
}

// ContextItem is one entry of RunAgentInput.context.
type ContextItem struct {
	Description string `json:"description"`
	Value       string `json:"value"`
}

// Props is forwardedProps.errand.
type Props struct {
	// TaskID names a task to follow instead of starting one.
	TaskID string `json:"task_id,omitempty"`
	// Agent runs a new task; default "default".
	Agent string `json:"agent,omitempty"`
	// Answer answers the question the task waits on.
	Answer string `json:"answer,omitempty"`
}

// ResumeEntry answers one interrupt: Answer is the payload as text.
type ResumeEntry struct {
	InterruptID string
	Cancelled   bool
	Answer      string
}

// Limits of an input.
const (
	MaxIDBytes       = 200 // threadId, runId, a task id
	MaxMessages      = 10_000
	MaxContextItems  = 100
	MaxResumeEntries = 1 // errand asks one question at a time
)

// FieldError is an input that does not fit the protocol or errand's use of
// it. Field is the key at fault, as the client spelled it.
type FieldError struct {
	Field, Message string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// object reads a JSON object's members; null and absent are the same,
// reported as nil.
func object(field string, raw json.RawMessage) (map[string]json.RawMessage, error) {
	if isNull(raw) {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return nil, fieldErr(field, "must be a JSON object")
	}
	return m, nil
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// str reads a string member; absent and null give "".
func str(field string, raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", fieldErr(field, "must be a string")
	}
	return s, nil
}

// array reads an array member; absent and null give nil.
func array(field string, raw json.RawMessage, limit int) ([]json.RawMessage, error) {
	if isNull(raw) {
		return nil, nil
	}
	var a []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &a) != nil {
		return nil, fieldErr(field, "must be an array")
	}
	if len(a) > limit {
		return nil, fieldErr(field, "has %d entries; the limit is %d", len(a), limit)
	}
	return a, nil
}

// id reads a required identifier: not blank, short, no control characters.
func id(field string, raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", fieldErr(field, "is required")
	}
	s, err := str(field, raw)
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(s) == "" {
		return "", fieldErr(field, "must not be blank")
	}
	if len(s) > MaxIDBytes {
		return "", fieldErr(field, "is %d bytes; the limit is %d", len(s), MaxIDBytes)
	}
	if strings.ContainsFunc(s, unicode.IsControl) {
		return "", fieldErr(field, "must not hold control characters")
	}
	return s, nil
}

// ParseInput reads a RunAgentInput body.
func ParseInput(body []byte) (*Input, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, fieldErr("", "a JSON body is required: a RunAgentInput (threadId, runId, messages…)")
	}
	if !utf8.Valid(body) {
		return nil, fieldErr("", "the body is not valid UTF-8")
	}
	if !json.Valid(body) {
		return nil, fieldErr("", "the body is not valid JSON")
	}
	top, err := object("", body)
	if err != nil || top == nil {
		return nil, fieldErr("", "the body must be a JSON object: a RunAgentInput")
	}
	in := &Input{}
	if in.ThreadID, err = id("threadId", top["threadId"]); err != nil {
		return nil, err
	}
	if in.RunID, err = id("runId", top["runId"]); err != nil {
		return nil, err
	}
	if _, ok := top["messages"]; !ok {
		return nil, fieldErr("messages", "is required (an empty array when following a task)")
	}
	if in.Messages, err = messages(top["messages"]); err != nil {
		return nil, err
	}
	if in.Context, err = contextItems(top["context"]); err != nil {
		return nil, err
	}
	if _, err := array("tools", top["tools"], 1000); err != nil {
		return nil, err
	}
	for _, k := range []string{"protocolVersion", "parentRunId"} {
		if _, err := str(k, top[k]); err != nil {
			return nil, err
		}
	}
	if in.Errand, err = props(top["forwardedProps"]); err != nil {
		return nil, err
	}
	if in.Resume, err = resume(top["resume"]); err != nil {
		return nil, err
	}
	if len(in.Resume) > 0 && in.Errand.Answer != "" {
		return nil, fieldErr("forwardedProps.errand.answer", "give the answer in resume or here, not both")
	}
	return in, nil
}

// roles are the roles a message may have.
var roles = map[string]bool{"developer": true, "system": true, "assistant": true, "user": true,
	"tool": true, "activity": true, "reasoning": true}

func messages(raw json.RawMessage) ([]Message, error) {
	list, err := array("messages", raw, MaxMessages)
	if err != nil {
		return nil, err
	}
	out := make([]Message, 0, len(list))
	for i, m := range list {
		field := fmt.Sprintf("messages[%d]", i)
		obj, err := object(field, m)
		if err != nil {
			return nil, err
		}
		if obj == nil {
			return nil, fieldErr(field, "must be a message object, not null")
		}
		var msg Message
		if msg.ID, err = str(field+".id", obj["id"]); err != nil {
			return nil, err
		}
		if msg.Role, err = str(field+".role", obj["role"]); err != nil {
			return nil, err
		}
		if !roles[msg.Role] {
			return nil, fieldErr(field+".role", "%q is not a role (developer, system, assistant, user, tool, activity, reasoning)", msg.Role)
		}
		switch msg.Role {
		case "user":
			if msg.Text, err = userText(field+".content", obj["content"]); err != nil {
				return nil, err
			}
		case "assistant", "system", "developer":
			// Content is a string; an assistant's may be absent.
			if msg.Text, err = str(field+".content", obj["content"]); err != nil {
				return nil, err
			}
		}
		out = append(out, msg)
	}
	return out, nil
}

// userText is a user message's content as text.
func userText(field string, raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", fieldErr(field, "is required: a string or an array of parts")
	}
	if raw[0] == '"' {
		return str(field, raw)
	}
	parts, err := array(field, raw, 1000)
	if err != nil {
		return "", fieldErr(field, "must be a string or an array of parts")
	}
	var texts []string
	for i, p := range parts {
		pf := fmt.Sprintf("%s[%d]", field, i)
		obj, err := object(pf, p)
		if err != nil {
			return "", err
		}
		if obj == nil {
			return "", fieldErr(pf, "must be a part object, not null")
		}
		typ, err := str(pf+".type", obj["type"])
		if err != nil {
			return "", err
		}
		switch typ {
		case "text":
			t, err := str(pf+".text", obj["text"])
			if err != nil {
				return "", err
			}
			if t != "" {
				texts = append(texts, t)
			}
		case "image", "audio", "video", "document":
			// errand's agents take text; the other parts are left out.
		default:
			return "", fieldErr(pf+".type", "%q is not a part type (text, image, audio, video, document)", typ)
		}
	}
	return strings.Join(texts, "\n\n"), nil
}

func contextItems(raw json.RawMessage) ([]ContextItem, error) {
	list, err := array("context", raw, MaxContextItems)
	if err != nil {
		return nil, err
	}
	var out []ContextItem
	for i, c := range list {
		field := fmt.Sprintf("context[%d]", i)
		obj, err := object(field, c)
		if err != nil {
			return nil, err
		}
		if obj == nil {
			return nil, fieldErr(field, "must be an object with description and value")
		}
		var item ContextItem
		if item.Description, err = str(field+".description", obj["description"]); err != nil {
			return nil, err
		}
		if item.Value, err = str(field+".value", obj["value"]); err != nil {
			return nil, err
		}
		out = append(out, item)
	}
	return out, nil
}

// props reads forwardedProps: any JSON value; only its errand member is
// errand's, and read strictly.
func props(raw json.RawMessage) (Props, error) {
	var p Props
	if isNull(raw) || bytes.TrimSpace(raw)[0] != '{' {
		return p, nil
	}
	top, err := object("forwardedProps", raw)
	if err != nil {
		return p, err
	}
	e, err := object("forwardedProps.errand", top["errand"])
	if err != nil || e == nil {
		return p, err
	}
	for k := range e {
		switch k {
		case "task_id", "agent", "answer":
		default:
			return p, fieldErr("forwardedProps.errand."+k, "is not a field errand knows (task_id, agent, answer)")
		}
	}
	if p.TaskID, err = str("forwardedProps.errand.task_id", e["task_id"]); err != nil {
		return p, err
	}
	if len(p.TaskID) > MaxIDBytes {
		return p, fieldErr("forwardedProps.errand.task_id", "is not a task id")
	}
	if p.Agent, err = str("forwardedProps.errand.agent", e["agent"]); err != nil {
		return p, err
	}
	if p.Answer, err = str("forwardedProps.errand.answer", e["answer"]); err != nil {
		return p, err
	}
	if _, ok := e["answer"]; ok && strings.TrimSpace(p.Answer) == "" {
		return p, fieldErr("forwardedProps.errand.answer", "must not be blank")
	}
	return p, nil
}

func resume(raw json.RawMessage) ([]ResumeEntry, error) {
	list, err := array("resume", raw, 1000)
	if err != nil {
		return nil, err
	}
	if len(list) > MaxResumeEntries {
		return nil, fieldErr("resume", "has %d entries: errand asks one question at a time, so a run resumes from one interrupt", len(list))
	}
	var out []ResumeEntry
	for i, r := range list {
		field := fmt.Sprintf("resume[%d]", i)
		obj, err := object(field, r)
		if err != nil {
			return nil, err
		}
		if obj == nil {
			return nil, fieldErr(field, "must be an object with interruptId and status")
		}
		var e ResumeEntry
		if e.InterruptID, err = id(field+".interruptId", obj["interruptId"]); err != nil {
			return nil, err
		}
		status, err := str(field+".status", obj["status"])
		if err != nil {
			return nil, err
		}
		switch status {
		case "resolved":
			if e.Answer, err = answerText(field+".payload", obj["payload"]); err != nil {
				return nil, err
			}
		case "cancelled":
			e.Cancelled = true
		default:
			return nil, fieldErr(field+".status", "%q is not resolved or cancelled", status)
		}
		if _, err := object(field+".metadata", obj["metadata"]); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// answerText is a resolved interrupt's payload as the answer: a string as
// it is, {"answer": "…"}, or any other JSON value as its text.
func answerText(field string, raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", fieldErr(field, "is required to resolve an interrupt: the answer (a string, or {\"answer\": \"…\"})")
	}
	var s string
	switch raw[0] {
	case '"':
		_ = json.Unmarshal(raw, &s)
	case '{':
		var a struct {
			Answer *string `json:"answer"`
		}
		if json.Unmarshal(raw, &a) == nil && a.Answer != nil {
			s = *a.Answer
		} else {
			s = string(raw)
		}
	default:
		s = string(raw)
	}
	if strings.TrimSpace(s) == "" {
		return "", fieldErr(field, "must not be blank: it is the answer")
	}
	return s, nil
}

// Goal is the text of the last user message, the goal of a new task, and
// the field it came from.
func (in *Input) Goal() (text, field string, err error) {
	for i := len(in.Messages) - 1; i >= 0; i-- {
		if m := in.Messages[i]; m.Role == "user" {
			field = fmt.Sprintf("messages[%d].content", i)
			if strings.TrimSpace(m.Text) == "" {
				return "", field, fieldErr(field, "the last user message has no text: it is the goal of the task")
			}
			return m.Text, field, nil
		}
	}
	return "", "messages", fieldErr("messages", "holds no user message: the last one is the goal of a new task (or name a task to follow in forwardedProps.errand.task_id)")
}

// Limits of the conversation a new task's input carries.
const (
	MaxConversationMessages = 20
	MaxConversationBytes    = 32 << 10
)

// Turn is one earlier message of the conversation, as a new task's input
// carries it.
type Turn struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Conversation is what was said before the goal: the messages with text
// before the last user message, the most recent MaxConversationMessages
// and at most MaxConversationBytes of them.
func (in *Input) Conversation() []Turn {
	last := -1
	for i, m := range in.Messages {
		if m.Role == "user" {
			last = i
		}
	}
	var out []Turn
	size := 0
	for i := last - 1; i >= 0 && len(out) < MaxConversationMessages; i-- {
		m := in.Messages[i]
		if strings.TrimSpace(m.Text) == "" {
			continue
		}
		if size += len(m.Text); size > MaxConversationBytes {
			break
		}
		out = append(out, Turn{Role: m.Role, Content: m.Text})
	}
	slices.Reverse(out)
	return out
}

// TaskInput is the input of a new task: the run's context and the
// conversation before the goal, when there are any.
func (in *Input) TaskInput() json.RawMessage {
	v := map[string]any{}
	if len(in.Context) > 0 {
		v["context"] = in.Context
	}
	if c := in.Conversation(); len(c) > 0 {
		v["conversation"] = c
	}
	if len(v) == 0 {
		return nil
	}
	b, _ := json.Marshal(v)
	return b
}
