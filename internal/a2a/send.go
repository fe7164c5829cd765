package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/telemetry"
)

// Limits of a message, besides those errand puts on a task.
const (
	// maxMessageIDBytes leaves room for the "a2a:" the idempotency key
	// adds within errand's 200 bytes.
	maxMessageIDBytes = 190
	maxContextIDBytes = 200
	maxParts          = 1000
)

// idempotencyPrefix starts the idempotency key of a task a message made:
// the message's id, so a retried send finds the task the first made.
const idempotencyPrefix = "a2a:"

// inMessage is a client's message, either version, checked.
type inMessage struct {
	id        string
	contextID string
	taskID    string
	texts     []string
	data      []json.RawMessage
	agent     string
}

// sendRequest is a SendMessage (or message/send, or a streaming send),
// either version, checked.
type sendRequest struct {
	msg           inMessage
	blocking      bool
	historyLength int
	push          *pushConfig // TaskID empty: the task the message makes
}

func (s *Server) readSend(req *request) (*sendRequest, *rpcError) {
	if req.method.dialect == dialectV03 {
		return readSendV03(req)
	}
	return readSendV1(req)
}

func readSendV1(req *request) (*sendRequest, *rpcError) {
	var p v1SendParams
	if e := decodeParams(req, &p); e != nil {
		return nil, e
	}
	if p.Message == nil {
		return nil, invalidParams("message", "is required")
	}
	m := p.Message
	if err := checkRoleV1(m.Role); err != nil {
		return nil, err
	}
	sr := &sendRequest{blocking: true, historyLength: -1}
	msg, e := readMessage(m.MessageID, m.ContextID, m.TaskID, m.Metadata, p.Metadata, len(m.Parts), func(i int) (string, json.RawMessage, string, *rpcError) {
		pt := m.Parts[i]
		switch {
		case pt.Text != nil:
			return *pt.Text, nil, "text", nil
		case len(pt.Data) > 0:
			return "", pt.Data, "data", nil
		case pt.Raw != nil || pt.URL != nil:
			return "", nil, "file", nil
		}
		return "", nil, "", invalidParams(fmt.Sprintf("message.parts[%d]", i), "has none of text, data, url and raw")
	})
	if e != nil {
		return nil, e
	}
	sr.msg = *msg
	if c := p.Configuration; c != nil {
		sr.blocking = !c.ReturnImmediately
		hl, e := historyOption(c.HistoryLength)
		if e != nil {
			return nil, e
		}
		sr.historyLength = hl
		if c.PushConfig != nil {
			sr.push = pushConfigFromV1(c.PushConfig)
		}
	}
	return sr, nil
}

func checkRoleV1(raw json.RawMessage) *rpcError {
	var name string
	var num int
	switch {
	case len(raw) == 0:
		return invalidParams("message.role", "is required: ROLE_USER")
	case json.Unmarshal(raw, &name) == nil:
		if name == "ROLE_USER" {
			return nil
		}
		return invalidParams("message.role", "%q is not ROLE_USER: a client's message comes from the user", clip(name, 40))
	case json.Unmarshal(raw, &num) == nil:
		if num == 1 {
			return nil
		}
		return invalidParams("message.role", "%d is not ROLE_USER (1): a client's message comes from the user", num)
	}
	return invalidParams("message.role", "must be ROLE_USER")
}

func readSendV03(req *request) (*sendRequest, *rpcError) {
	var p v03SendParams
	if e := decodeParams(req, &p); e != nil {
		return nil, e
	}
	if p.Message == nil {
		return nil, invalidParams("message", "is required")
	}
	m := p.Message
	if m.Role != "user" {
		return nil, invalidParams("message.role", "%q is not \"user\": a client's message comes from the user", clip(m.Role, 40))
	}
	if m.Kind != "" && m.Kind != "message" {
		return nil, invalidParams("message.kind", "%q is not \"message\"", clip(m.Kind, 40))
	}
	sr := &sendRequest{blocking: true, historyLength: -1}
	msg, e := readMessage(m.MessageID, m.ContextID, m.TaskID, m.Metadata, p.Metadata, len(m.Parts), func(i int) (string, json.RawMessage, string, *rpcError) {
		pt := m.Parts[i]
		field := fmt.Sprintf("message.parts[%d]", i)
		switch pt.Kind {
		case "text":
			if pt.Text == nil {
				return "", nil, "", invalidParams(field+".text", "is required in a text part")
			}
			return *pt.Text, nil, "text", nil
		case "data":
			if len(pt.Data) == 0 {
				return "", nil, "", invalidParams(field+".data", "is required in a data part")
			}
			return "", pt.Data, "data", nil
		case "file":
			return "", nil, "file", nil
		}
		return "", nil, "", invalidParams(field+".kind", "%q is not text, data or file", clip(pt.Kind, 40))
	})
	if e != nil {
		return nil, e
	}
	sr.msg = *msg
	if c := p.Configuration; c != nil {
		if c.Blocking != nil {
			sr.blocking = *c.Blocking
		}
		hl, e := historyOption(c.HistoryLength)
		if e != nil {
			return nil, e
		}
		sr.historyLength = hl
		if c.PushConfig != nil {
			sr.push = pushConfigFromV03(c.PushConfig)
		}
	}
	return sr, nil
}

// readMessage checks what both versions' messages have in common; part
// returns the text or data of part i, and its kind.
func readMessage(id, contextID, taskID string, metadata, requestMetadata json.RawMessage, parts int,
	part func(i int) (text string, data json.RawMessage, kind string, err *rpcError),
) (*inMessage, *rpcError) {
	switch {
	case id == "":
		return nil, invalidParams("message.messageId", "is required: errand uses it to recognise a message sent twice")
	case len(id) > maxMessageIDBytes:
		return nil, invalidParams("message.messageId", "is %d bytes; the limit is %d", len(id), maxMessageIDBytes)
	case hasControl(id):
		return nil, invalidParams("message.messageId", "holds a control character")
	case len(contextID) > maxContextIDBytes:
		return nil, invalidParams("message.contextId", "is %d bytes; the limit is %d", len(contextID), maxContextIDBytes)
	case hasControl(contextID):
		return nil, invalidParams("message.contextId", "holds a control character")
	case len(taskID) > errand.MaxPushConfigIDBytes:
		return nil, invalidParams("message.taskId", "is %d bytes; no task has so long an id", len(taskID))
	case parts == 0:
		return nil, invalidParams("message.parts", "is empty: a message needs a text part")
	case parts > maxParts:
		return nil, invalidParams("message.parts", "has %d parts; the limit is %d", parts, maxParts)
	}
	m := &inMessage{id: id, contextID: contextID, taskID: taskID}
	for i := range parts {
		text, data, kind, err := part(i)
		if err != nil {
			return nil, err
		}
		switch kind {
		case "text":
			m.texts = append(m.texts, text)
		case "data":
			m.data = append(m.data, compact(data))
		case "file":
			return nil, &rpcError{Code: CodeContentTypeNotSupported,
				Message: fmt.Sprintf("message.parts[%d] is a file: errand takes text parts (the goal, or an answer) and data parts (JSON input), not files", i)}
		}
	}
	for _, md := range []struct {
		field string
		raw   json.RawMessage
	}{{"message.metadata", metadata}, {"metadata", requestMetadata}} {
		agent, e := agentOf(md.field, md.raw)
		if e != nil {
			return nil, e
		}
		if m.agent == "" {
			m.agent = agent
		}
	}
	return m, nil
}

// agentOf reads the agent a metadata object names ("agent": "name").
func agentOf(field string, raw json.RawMessage) (string, *rpcError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	var md map[string]json.RawMessage
	if json.Unmarshal(raw, &md) != nil {
		return "", invalidParams(field, "must be a JSON object")
	}
	a, ok := md["agent"]
	if !ok {
		return "", nil
	}
	var agent string
	if json.Unmarshal(a, &agent) != nil || strings.TrimSpace(agent) == "" {
		return "", invalidParams(field+".agent", "must be the name of one of the card's skills (an errand agent)")
	}
	return agent, nil
}

func hasControl(s string) bool {
	return strings.IndexFunc(s, unicode.IsControl) >= 0 || !utf8.ValidString(s)
}

// goal is what the message asks for: its text parts, one per line.
func (m *inMessage) goal() string { return strings.Join(m.texts, "\n") }

// input is the task's input the data parts make: one object part as it
// is, else {"data": [every data part]}.
func (m *inMessage) input() json.RawMessage {
	switch {
	case len(m.data) == 0:
		return nil
	case len(m.data) == 1 && len(m.data[0]) > 0 && m.data[0][0] == '{':
		return m.data[0]
	}
	b, _ := json.Marshal(map[string][]json.RawMessage{"data": m.data})
	return b
}

// answer is what the message answers: its text, else its data as JSON.
func (m *inMessage) answer() string {
	if len(m.texts) > 0 {
		return m.goal()
	}
	parts := make([]string, len(m.data))
	for i, d := range m.data {
		parts[i] = string(d)
	}
	return strings.Join(parts, "\n")
}

// send runs SendMessage: a message without a task id submits a task, one
// with a task id answers that task's question. Blocking, it waits until
// the task ends or asks a question (at most MaxBlock).
func (s *Server) send(ctx context.Context, req *request) (any, *rpcError) {
	sr, e := s.readSend(req)
	if e != nil {
		return nil, e
	}
	after, err := s.client.LastEventID(ctx)
	if err != nil {
		return nil, s.internal(req, err)
	}
	t, e := s.deliver(ctx, req, sr)
	if e != nil {
		return nil, e
	}
	if sr.blocking && !stateOf(t.Status).settled() {
		if t, err = s.waitSettled(ctx, t, after, s.cfg.MaxBlock); err != nil {
			return nil, s.internal(req, err)
		}
	}
	v, err := s.view(ctx, t, viewOptions{history: sr.historyLength != 0, historyLength: sr.historyLength, artifacts: true})
	if err != nil {
		return nil, s.internal(req, err)
	}
	if req.method.dialect == dialectV03 {
		return v03TaskOf(v), nil
	}
	return v1StreamResponse{Task: v1TaskOf(v)}, nil
}

// deliver hands a message to errand: it submits a task, or answers the
// question of the task it names. The push config it carries is saved for
// that task.
func (s *Server) deliver(ctx context.Context, req *request, sr *sendRequest) (*errand.Task, *rpcError) {
	field := "configuration.taskPushNotificationConfig"
	if req.method.dialect == dialectV03 {
		field = "configuration.pushNotificationConfig"
	}
	if sr.push != nil {
		// Checked first: a send that fails must not have started a task.
		if e := s.checkPushConfig(sr.push, field); e != nil {
			return nil, e
		}
	}
	var t *errand.Task
	var e *rpcError
	if sr.msg.taskID == "" {
		t, e = s.submit(ctx, req, &sr.msg)
	} else {
		t, e = s.answer(ctx, req, &sr.msg)
	}
	if e != nil {
		return nil, e
	}
	if sr.push != nil {
		pc := *sr.push
		pc.TaskID = t.ID
		if _, e := s.putPushConfig(ctx, req, &pc, field); e != nil {
			return nil, e
		}
	}
	return t, nil
}

func (s *Server) submit(ctx context.Context, req *request, m *inMessage) (*errand.Task, *rpcError) {
	goal := m.goal()
	if strings.TrimSpace(goal) == "" {
		return nil, invalidParams("message.parts", "has no text: errand needs a text part saying what to do")
	}
	contextID := m.contextID
	if contextID == "" {
		contextID = uuid.NewString()
	}
	agent := m.agent
	if agent == "" {
		agent = s.cfg.DefaultAgent
	}
	metadata, _ := json.Marshal(map[string]any{metadataKey: map[string]string{"message_id": m.id}})
	if req.traceparent != "" {
		// Kept as POST /api/tasks keeps it: an invalid one is ignored.
		metadata = telemetry.WithTraceparent(metadata, req.traceparent)
	}
	res, err := s.client.SubmitResult(ctx, &errand.SubmitParams{
		Goal:           goal,
		Agent:          agent,
		Input:          m.input(),
		Metadata:       metadata,
		SessionID:      contextID,
		IdempotencyKey: idempotencyPrefix + m.id,
	})
	if err != nil {
		var ve *errand.ValidationError
		if errors.As(err, &ve) {
			return nil, invalidParams(messageField(ve.Field), "%s", ve.Message)
		}
		return nil, s.internal(req, err)
	}
	return res.Task, nil
}

// messageField names the part of a message an errand field came from.
func messageField(field string) string {
	switch field {
	case "goal":
		return "message.parts (text)"
	case "input":
		return "message.parts (data)"
	case "session_id":
		return "message.contextId"
	case "agent":
		return "metadata.agent"
	case "idempotency_key":
		return "message.messageId"
	}
	return field
}

// answer answers the open question of the task m names.
func (s *Server) answer(ctx context.Context, req *request, m *inMessage) (*errand.Task, *rpcError) {
	t, e := s.getTaskByID(ctx, req, "message.taskId", m.taskID)
	if e != nil {
		return nil, e
	}
	if m.contextID != "" && m.contextID != contextOf(t) {
		return nil, invalidParams("message.contextId", "%q is not the context of task %s (%q)", clip(m.contextID, 100), t.ID, contextOf(t))
	}
	if t.Status != errand.StatusInputRequired {
		return nil, notAnswerable(t)
	}
	answer := m.answer()
	if strings.TrimSpace(answer) == "" {
		return nil, invalidParams("message.parts", "has no text: the answer to the task's question is its text parts")
	}
	if _, err := s.client.Answer(ctx, t.ID, answer); err != nil {
		var ve *errand.ValidationError
		switch {
		case errors.As(err, &ve):
			return nil, invalidParams("message.parts", "%s", ve.Message)
		case errors.Is(err, errand.ErrInputClosed), errors.Is(err, errand.ErrIllegalTransition):
			if t, gerr := s.client.Get(ctx, t.ID); gerr == nil {
				return nil, notAnswerable(t)
			}
		}
		return nil, s.taskError(req, t.ID, err)
	}
	t, err := s.client.Get(ctx, t.ID)
	if err != nil {
		return nil, s.taskError(req, m.taskID, err)
	}
	return t, nil
}

// notAnswerable refuses a message to a task that asked nothing.
func notAnswerable(t *errand.Task) *rpcError {
	var e *rpcError
	if t.Status.Terminal() {
		e = rpcErr(CodeUnsupportedOperation, "task %s has ended (%s): it takes no more messages; send one without a taskId to start a new task", t.ID, t.Status)
	} else {
		e = rpcErr(CodeUnsupportedOperation, "task %s is %s, not input-required: errand takes a message for a task only when the task asked a question", t.ID, t.Status)
	}
	e.Data, _ = json.Marshal(map[string]string{"taskId": t.ID, "status": string(t.Status)})
	return e
}

// statusEvents are the journal events that may change what A2A shows of
// a task's status.
var statusEvents = []string{
	errand.EventTaskCreated, errand.EventTaskStarted, errand.EventTaskProgress, errand.EventTaskCompleted,
	errand.EventTaskFailed, errand.EventTaskCancelled, errand.EventTaskRetryScheduled, errand.EventTaskRetried,
	errand.EventTaskReleased, errand.EventTaskRecovered, errand.EventTaskBlocked, errand.EventTaskUnblocked,
	errand.EventTaskSubtasksDone, errand.EventTaskInputRequired, errand.EventTaskInputAnswered,
	errand.EventTaskPaused, errand.EventTaskResumed, "task." + string(errand.StatusWaitingSubtasks),
}

// waitSettled follows t's events after the journal id after until t ends
// or asks a question, for at most limit, and returns t as it then is.
func (s *Server) waitSettled(ctx context.Context, t *errand.Task, after int64, limit time.Duration) (*errand.Task, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub, err := s.client.Subscribe(ctx, errand.EventFilter{TaskID: t.ID, Types: statusEvents}, after)
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	timer := s.cfg.Clock.NewTimer(limit)
	defer timer.Stop()
	for !stateOf(t.Status).settled() {
		select {
		case _, ok := <-sub.Events():
			if !ok {
				if err := sub.Err(); err != nil {
					return nil, err
				}
				return t, nil
			}
			if t, err = s.client.Get(ctx, t.ID); err != nil {
				return nil, err
			}
		case <-timer.C():
			return s.client.Get(ctx, t.ID) // as it stands now
		case <-ctx.Done():
			return t, nil
		case <-s.cfg.Done:
			return t, nil
		}
	}
	return t, nil
}
