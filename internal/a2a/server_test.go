package a2a

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
)

func TestSendMessageSubmitsAndWaits(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	task := f.send(userMessage("m-1", "write a haiku", "about rain"), nil)

	require.True(t, strings.HasPrefix(task.ID, "tsk_"), task.ID)
	require.Equal(t, "TASK_STATE_COMPLETED", task.Status.State, "blocking by default: the task has ended")
	_, err := uuid.Parse(task.ContextID)
	require.NoError(t, err, "a context is made for a message without one")
	require.Len(t, task.Artifacts, 1)
	require.Equal(t, "result", task.Artifacts[0].ArtifactID)
	require.Equal(t, "done: write a haiku\nabout rain", textOf(task.Artifacts[0].Parts[0]), "the text parts, one per line, are the goal")
	require.Len(t, task.History, 1)
	h := task.History[0]
	require.Equal(t, "m-1", h.MessageID)
	require.JSONEq(t, `"ROLE_USER"`, string(h.Role))
	require.Equal(t, task.ContextID, h.ContextID)
	require.JSONEq(t, `{"errand":{"status":"completed","agent":"default","title":"write a haiku"}}`, string(task.Metadata))

	et, err := f.client.Get(t.Context(), task.ID)
	require.NoError(t, err)
	require.Equal(t, task.ContextID, et.SessionID, "the context is errand's session")
	require.Equal(t, "a2a:m-1", et.IdempotencyKey)

	// The same message again finds the same task.
	again := f.send(userMessage("m-1", "write a haiku", "about rain"), nil)
	require.Equal(t, task.ID, again.ID)
	res, err := f.client.List(t.Context(), &errand.ListParams{})
	require.NoError(t, err)
	require.Len(t, res.Tasks, 1)
}

func TestSendMessageKeepsContextAndNamesAgent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	msg := userMessage("m-ctx", "go")
	msg["contextId"] = "conversation-7"
	msg["metadata"] = map[string]any{"agent": "input"}
	msg["parts"] = []any{map[string]any{"text": "go"}, map[string]any{"data": map[string]any{"city": "Paris"}}}
	task := f.send(msg, nil)
	require.Equal(t, "conversation-7", task.ContextID)
	require.Equal(t, "TASK_STATE_COMPLETED", task.Status.State)
	require.JSONEq(t, `{"city":"Paris"}`, string(task.Artifacts[0].Parts[0].Data), "one object data part is the input")
	require.Nil(t, task.Artifacts[0].Parts[0].Text)
	require.Equal(t, "application/json", task.Artifacts[0].Parts[0].MediaType)
	require.Len(t, task.History[0].Parts, 2, "the history shows the goal and the input")

	// Two data parts, the agent named in the request's metadata.
	two := f.send(map[string]any{"messageId": "m-two", "role": "ROLE_USER", "parts": []any{
		map[string]any{"text": "go"}, map[string]any{"data": 1}, map[string]any{"data": []any{"x"}},
	}}, nil)
	_ = two
	var r sendResult
	f.ok("SendMessage", map[string]any{"message": map[string]any{"messageId": "m-three", "role": "ROLE_USER", "parts": []any{
		map[string]any{"text": "go"}, map[string]any{"data": 1}, map[string]any{"data": []any{"x"}},
	}}, "metadata": map[string]any{"agent": "input"}}, &r)
	require.JSONEq(t, `{"data":[1,["x"]]}`, string(r.Task.Artifacts[0].Parts[0].Data))

	e := f.fails(CodeInvalidParams, "SendMessage", map[string]any{"message": map[string]any{
		"messageId": "m-x", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "go"}}, "metadata": map[string]any{"agent": "nobody"},
	}})
	require.Contains(t, e.Message, "metadata.agent")
	require.Contains(t, e.Message, "nobody")
}

func TestInputRequiredRoundTrip(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	msg := userMessage("q-1", "paint the fence")
	msg["metadata"] = map[string]any{"agent": "ask"}
	task := f.send(msg, nil)
	require.Equal(t, "TASK_STATE_INPUT_REQUIRED", task.Status.State, "a blocking send stops at a question")
	require.NotNil(t, task.Status.Message)
	require.JSONEq(t, `"ROLE_AGENT"`, string(task.Status.Message.Role))
	require.Equal(t, "Which colour?", textOf(task.Status.Message.Parts[0]))
	require.True(t, strings.HasPrefix(task.Status.Message.MessageID, "inp_"))

	// A message to the task answers it.
	answer := userMessage("q-2", "blue")
	answer["taskId"] = task.ID
	answer["contextId"] = task.ContextID
	done := f.send(answer, nil)
	require.Equal(t, task.ID, done.ID)
	require.Equal(t, "TASK_STATE_COMPLETED", done.Status.State)
	require.Equal(t, "colour: blue", textOf(done.Artifacts[0].Parts[0]))
	var texts []string
	for _, m := range done.History {
		texts = append(texts, string(m.Role)+" "+textOf(m.Parts[0]))
	}
	require.Equal(t, []string{`"ROLE_USER" paint the fence`, `"ROLE_AGENT" Which colour?`, `"ROLE_USER" blue`}, texts)

	// A task that ended takes no more messages.
	answer["messageId"] = "q-3"
	e := f.fails(CodeUnsupportedOperation, "SendMessage", map[string]any{"message": answer})
	require.Contains(t, e.Message, "has ended")
	answer["taskId"] = "tsk_nope"
	f.fails(CodeTaskNotFound, "SendMessage", map[string]any{"message": answer})
}

func TestMessageToTaskNotAskingIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	msg := userMessage("s-1", "wait")
	msg["metadata"] = map[string]any{"agent": "slow"}
	task := f.send(msg, map[string]any{"returnImmediately": true})
	require.Equal(t, "TASK_STATE_SUBMITTED", task.Status.State, "returnImmediately answers at once")
	f.waitStarted()

	answer := userMessage("s-2", "hurry")
	answer["taskId"] = task.ID
	e := f.fails(CodeUnsupportedOperation, "SendMessage", map[string]any{"message": answer})
	require.Contains(t, e.Message, "not input-required")

	answer["contextId"] = "another"
	e = f.fails(CodeInvalidParams, "SendMessage", map[string]any{"message": answer})
	require.Contains(t, e.Message, "message.contextId")
}

func TestSendMessageV03(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var task v03Task
	f.ok("message/send", map[string]any{"message": userMessageV03("v3-1", "hello")}, &task)
	require.Equal(t, "task", task.Kind)
	require.Equal(t, "completed", task.Status.State)
	require.Equal(t, "text", task.Artifacts[0].Parts[0].Kind)
	require.Equal(t, "done: hello", *task.Artifacts[0].Parts[0].Text)
	require.Equal(t, "message", task.History[0].Kind)
	require.Equal(t, "user", task.History[0].Role)

	msg := userMessageV03("v3-2", "fence")
	msg["metadata"] = map[string]any{"agent": "ask"}
	f.ok("message/send", map[string]any{"message": msg}, &task)
	require.Equal(t, "input-required", task.Status.State)
	require.Equal(t, "agent", task.Status.Message.Role)
	require.Equal(t, "Which colour?", *task.Status.Message.Parts[0].Text)

	answer := userMessageV03("v3-3", "red")
	answer["taskId"] = task.ID
	f.ok("message/send", map[string]any{"message": answer}, &task)
	require.Equal(t, "completed", task.Status.State)
	require.Equal(t, "colour: red", *task.Artifacts[0].Parts[0].Text)

	// Non-blocking, and a JSON result as a data part (an object in v0.3).
	msg = userMessageV03("v3-4", "json please")
	msg["metadata"] = map[string]any{"agent": "progress"}
	f.ok("message/send", map[string]any{"message": msg, "configuration": map[string]any{"blocking": false}}, &task)
	require.Contains(t, []string{"submitted", "working"}, task.Status.State)
	f.open()
	f.waitStatus(task.ID, errand.StatusCompleted)
	f.ok("tasks/get", map[string]any{"id": task.ID}, &task)
	require.Equal(t, "data", task.Artifacts[0].Parts[0].Kind)
	require.JSONEq(t, `{"answer":42}`, string(task.Artifacts[0].Parts[0].Data))
}

func TestSendMessageRefusesBadMessages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	long := strings.Repeat("x", 300)
	for name, tc := range map[string]struct {
		method string
		params any
		code   int
		field  string
	}{
		"no message":        {"SendMessage", map[string]any{}, CodeInvalidParams, "message"},
		"no message id":     {"SendMessage", map[string]any{"message": map[string]any{"role": "ROLE_USER", "parts": []any{map[string]any{"text": "x"}}}}, CodeInvalidParams, "message.messageId"},
		"long message id":   {"SendMessage", map[string]any{"message": userMessage(long, "x")}, CodeInvalidParams, "message.messageId"},
		"agent role":        {"SendMessage", map[string]any{"message": map[string]any{"messageId": "a", "role": "ROLE_AGENT", "parts": []any{map[string]any{"text": "x"}}}}, CodeInvalidParams, "message.role"},
		"no role":           {"SendMessage", map[string]any{"message": map[string]any{"messageId": "a", "parts": []any{map[string]any{"text": "x"}}}}, CodeInvalidParams, "message.role"},
		"no parts":          {"SendMessage", map[string]any{"message": userMessage("a")}, CodeInvalidParams, "message.parts"},
		"empty part":        {"SendMessage", map[string]any{"message": map[string]any{"messageId": "a", "role": "ROLE_USER", "parts": []any{map[string]any{}}}}, CodeInvalidParams, "message.parts[0]"},
		"only data":         {"SendMessage", map[string]any{"message": map[string]any{"messageId": "a", "role": "ROLE_USER", "parts": []any{map[string]any{"data": map[string]any{}}}}}, CodeInvalidParams, "message.parts"},
		"blank text":        {"SendMessage", map[string]any{"message": userMessage("a", "  ")}, CodeInvalidParams, "message.parts"},
		"file":              {"SendMessage", map[string]any{"message": map[string]any{"messageId": "a", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "x"}, map[string]any{"url": "https://x/y.pdf"}}}}, CodeContentTypeNotSupported, ""},
		"raw":               {"SendMessage", map[string]any{"message": map[string]any{"messageId": "a", "role": "ROLE_USER", "parts": []any{map[string]any{"raw": "aGk="}}}}, CodeContentTypeNotSupported, ""},
		"parts not a list":  {"SendMessage", map[string]any{"message": map[string]any{"messageId": "a", "role": "ROLE_USER", "parts": "x"}}, CodeInvalidParams, "message.parts"},
		"control in ctx":    {"SendMessage", map[string]any{"message": map[string]any{"messageId": "a", "contextId": "a\nb", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "x"}}}}, CodeInvalidParams, "message.contextId"},
		"metadata list":     {"SendMessage", map[string]any{"message": userMessage("a", "x"), "metadata": []any{}}, CodeInvalidParams, "metadata"},
		"agent not string":  {"SendMessage", map[string]any{"message": userMessage("a", "x"), "metadata": map[string]any{"agent": 3}}, CodeInvalidParams, "metadata.agent"},
		"negative history":  {"SendMessage", map[string]any{"message": userMessage("a", "x"), "configuration": map[string]any{"historyLength": -1}}, CodeInvalidParams, "historyLength"},
		"goal control char": {"SendMessage", map[string]any{"message": userMessage("a", "x\x00y")}, CodeInvalidParams, "message.parts (text)"},
		"v03 bad kind":      {"message/send", map[string]any{"message": map[string]any{"kind": "message", "messageId": "a", "role": "user", "parts": []any{map[string]any{"kind": "picture"}}}}, CodeInvalidParams, "message.parts[0].kind"},
		"v03 agent role":    {"message/send", map[string]any{"message": map[string]any{"kind": "message", "messageId": "a", "role": "agent", "parts": []any{map[string]any{"kind": "text", "text": "x"}}}}, CodeInvalidParams, "message.role"},
		"v03 file":          {"message/send", map[string]any{"message": map[string]any{"kind": "message", "messageId": "a", "role": "user", "parts": []any{map[string]any{"kind": "file", "file": map[string]any{"uri": "https://x"}}}}}, CodeContentTypeNotSupported, ""},
		"v03 text missing":  {"message/send", map[string]any{"message": map[string]any{"kind": "message", "messageId": "a", "role": "user", "parts": []any{map[string]any{"kind": "text"}}}}, CodeInvalidParams, "message.parts[0].text"},
	} {
		t.Run(name, func(t *testing.T) {
			e := f.fails(tc.code, tc.method, tc.params)
			if tc.field != "" {
				require.True(t, strings.HasPrefix(e.Message, tc.field+":"), "message %q names %s", e.Message, tc.field)
				var data map[string]string
				require.NoError(t, json.Unmarshal(e.Data, &data))
				require.Equal(t, tc.field, data["field"])
			}
		})
	}
	res, err := f.client.List(t.Context(), &errand.ListParams{})
	require.NoError(t, err)
	require.Empty(t, res.Tasks, "no bad message made a task")
}

func TestGetTask(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	task := f.send(userMessage("g-1", "hi"), nil)
	var got v1Task
	f.ok("GetTask", map[string]any{"id": task.ID}, &got)
	require.Equal(t, task.ID, got.ID)
	require.Equal(t, "TASK_STATE_COMPLETED", got.Status.State)
	require.Len(t, got.History, 1)
	require.Len(t, got.Artifacts, 1)

	var short v1Task
	f.ok("GetTask", map[string]any{"id": task.ID, "historyLength": 0}, &short)
	require.Empty(t, short.History)

	f.fails(CodeTaskNotFound, "GetTask", map[string]any{"id": "tsk_nope"})
	f.fails(CodeTaskNotFound, "tasks/get", map[string]any{"id": strings.Repeat("t", 1000)})
	f.fails(CodeInvalidParams, "GetTask", map[string]any{})
	f.fails(CodeInvalidParams, "GetTask", map[string]any{"id": 7})
	f.fails(CodeInvalidParams, "GetTask", map[string]any{"id": task.ID, "historyLength": -2})

	// A task submitted elsewhere shows its own id as its context.
	other, err := f.client.Submit(t.Context(), &errand.SubmitParams{Goal: "from the CLI"})
	require.NoError(t, err)
	f.waitStatus(other.ID, errand.StatusCompleted)
	var v3 v03Task
	f.ok("tasks/get", map[string]any{"id": other.ID}, &v3)
	require.Equal(t, other.ID, v3.ContextID)
	require.Equal(t, other.ID+"-goal", v3.History[0].MessageID)
	require.Equal(t, "from the CLI", *v3.History[0].Parts[0].Text)
}

func TestCancelTask(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	msg := userMessage("c-1", "wait")
	msg["metadata"] = map[string]any{"agent": "slow"}
	task := f.send(msg, map[string]any{"returnImmediately": true})
	f.waitStarted()

	var got v1Task
	f.ok("CancelTask", map[string]any{"id": task.ID}, &got)
	require.Equal(t, "TASK_STATE_CANCELED", got.Status.State, "the answer waits for the agent to stop")
	require.Equal(t, "cancelled by an A2A client", textOf(got.Status.Message.Parts[0]))

	e := f.fails(CodeTaskNotCancelable, "CancelTask", map[string]any{"id": task.ID})
	require.Contains(t, e.Message, "cancelled")
	f.fails(CodeTaskNotFound, "CancelTask", map[string]any{"id": "tsk_nope"})

	// v0.3, on a task that waits for an answer.
	msg = userMessageV03("c-2", "fence")
	msg["metadata"] = map[string]any{"agent": "ask"}
	var v3 v03Task
	f.ok("message/send", map[string]any{"message": msg}, &v3)
	require.Equal(t, "input-required", v3.Status.State)
	f.ok("tasks/cancel", map[string]any{"id": v3.ID}, &v3)
	require.Equal(t, "canceled", v3.Status.State)
	f.fails(CodeTaskNotCancelable, "tasks/cancel", map[string]any{"id": v3.ID})
}

func TestBlockingSendGivesUpAtMaxBlock(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.MaxBlock = time.Minute })
	msg := userMessage("b-1", "wait")
	msg["metadata"] = map[string]any{"agent": "slow"}
	got := make(chan *v1Task, 1)
	go func() {
		var r sendResult
		params, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": map[string]any{"message": msg}})
		res, err := http.Post(f.http.URL+"/a2a", "application/json", strings.NewReader(string(params)))
		if err != nil {
			got <- nil
			return
		}
		defer res.Body.Close()
		var a rpcAnswer
		if json.NewDecoder(res.Body).Decode(&a) != nil || json.Unmarshal(a.Result, &r) != nil {
			got <- nil
			return
		}
		got <- r.Task
	}()
	f.waitStarted()
	require.NoError(t, f.clock.WaitForTimer(t.Context(), "(*Server).waitSettled")) // the send's wait limit
	f.clock.Advance(time.Minute)
	select {
	case task := <-got:
		require.NotNil(t, task)
		require.Equal(t, "TASK_STATE_WORKING", task.Status.State, "the task as it stands when the wait ends")
	case <-time.After(waitTimeout):
		t.Fatal("the blocking send did not answer at MaxBlock")
	}
}

func TestListTasks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var ids []string
	for i, ctxID := range []string{"a", "a", "b", "a"} {
		msg := userMessage("l-"+string(rune('0'+i)), "task")
		msg["contextId"] = ctxID
		ids = append(ids, f.send(msg, nil).ID)
	}
	ask := userMessage("l-ask", "fence")
	ask["metadata"] = map[string]any{"agent": "ask"}
	ask["contextId"] = "a"
	asking := f.send(ask, nil)

	var page v1ListResult
	f.ok("ListTasks", map[string]any{"contextId": "a", "pageSize": 2}, &page)
	require.Equal(t, 2, page.PageSize)
	require.Len(t, page.Tasks, 2)
	require.Equal(t, asking.ID, page.Tasks[0].ID, "newest first")
	require.Equal(t, ids[3], page.Tasks[1].ID)
	require.Empty(t, page.Tasks[1].Artifacts, "artifacts only when asked for")
	require.NotEmpty(t, page.NextPageToken)
	var rest v1ListResult
	f.ok("ListTasks", map[string]any{"contextId": "a", "pageSize": 2, "pageToken": page.NextPageToken, "includeArtifacts": true}, &rest)
	require.Equal(t, []string{ids[1], ids[0]}, []string{rest.Tasks[0].ID, rest.Tasks[1].ID})
	require.NotEmpty(t, rest.Tasks[0].Artifacts)

	var waiting v1ListResult
	f.ok("ListTasks", map[string]any{"status": "TASK_STATE_INPUT_REQUIRED"}, &waiting)
	require.Len(t, waiting.Tasks, 1)
	require.Equal(t, asking.ID, waiting.Tasks[0].ID)
	require.Equal(t, "Which colour?", textOf(waiting.Tasks[0].Status.Message.Parts[0]))
	f.ok("ListTasks", map[string]any{"status": 6}, &waiting)
	require.Len(t, waiting.Tasks, 1, "a state by number")
	f.ok("ListTasks", map[string]any{"status": "TASK_STATE_REJECTED"}, &waiting)
	require.Empty(t, waiting.Tasks)

	var recent v1ListResult
	f.ok("ListTasks", map[string]any{"statusTimestampAfter": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, &recent)
	require.Empty(t, recent.Tasks)
	var all v1ListResult
	f.ok("ListTasks", map[string]any{"historyLength": 0}, &all)
	require.Len(t, all.Tasks, 5)
	require.Empty(t, all.Tasks[0].History)
	require.Empty(t, all.NextPageToken)

	f.fails(CodeInvalidParams, "ListTasks", map[string]any{"status": "DONE"})
	f.fails(CodeInvalidParams, "ListTasks", map[string]any{"status": 99})
	f.fails(CodeInvalidParams, "ListTasks", map[string]any{"pageSize": 0})
	e := f.fails(CodeInvalidParams, "ListTasks", map[string]any{"pageToken": "!!"})
	require.True(t, strings.HasPrefix(e.Message, "pageToken:"), e.Message)
	f.fails(CodeInvalidParams, "ListTasks", map[string]any{"statusTimestampAfter": "yesterday"})
	f.fails(CodeMethodNotFound, "tasks/list", map[string]any{})
}
