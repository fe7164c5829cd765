package a2a

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/webhook"
)

func TestPushConfigMethods(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	task := f.send(userMessage("p-1", "hi"), nil)

	var c v1PushConfig
	f.ok("CreateTaskPushNotificationConfig", map[string]any{
		"taskId": task.ID, "url": "https://hooks.example.com/a", "token": "tok-1",
		"authentication": map[string]any{"scheme": "Bearer", "credentials": "cred"},
	}, &c)
	require.NotEmpty(t, c.ID, "an id is made")
	require.Equal(t, task.ID, c.TaskID)
	require.Equal(t, "https://hooks.example.com/a", c.URL)
	require.Equal(t, "tok-1", c.Token)
	require.Equal(t, &v1Authentication{Scheme: "Bearer", Credentials: "cred"}, c.Authentication)

	var named v1PushConfig
	f.ok("CreateTaskPushNotificationConfig", map[string]any{"taskId": task.ID, "id": "mine", "url": "https://hooks.example.com/b"}, &named)
	require.Equal(t, "mine", named.ID)

	var got v1PushConfig
	f.ok("GetTaskPushNotificationConfig", map[string]any{"taskId": task.ID, "id": "mine"}, &got)
	require.Equal(t, named, got)
	f.fails(CodeTaskNotFound, "GetTaskPushNotificationConfig", map[string]any{"taskId": task.ID, "id": "other"})
	f.fails(CodeInvalidParams, "GetTaskPushNotificationConfig", map[string]any{"taskId": task.ID})

	var page v1PushList
	f.ok("ListTaskPushNotificationConfigs", map[string]any{"taskId": task.ID, "pageSize": 1}, &page)
	require.Len(t, page.Configs, 1)
	require.NotEmpty(t, page.NextPageToken)
	var rest v1PushList
	f.ok("ListTaskPushNotificationConfigs", map[string]any{"taskId": task.ID, "pageToken": page.NextPageToken}, &rest)
	require.Len(t, rest.Configs, 1)
	require.Empty(t, rest.NextPageToken)
	require.ElementsMatch(t, []string{c.ID, "mine"}, []string{page.Configs[0].ID, rest.Configs[0].ID})

	a := f.call("DeleteTaskPushNotificationConfig", map[string]any{"taskId": task.ID, "id": "mine"})
	require.Nil(t, a.Error)
	require.JSONEq(t, `{}`, string(a.Result))
	a = f.call("DeleteTaskPushNotificationConfig", map[string]any{"taskId": task.ID, "id": "mine"})
	require.Nil(t, a.Error, "deleting twice is fine")
	f.ok("ListTaskPushNotificationConfig", map[string]any{"taskId": task.ID}, &page)
	require.Len(t, page.Configs, 1)

	f.fails(CodeTaskNotFound, "CreateTaskPushNotificationConfig", map[string]any{"taskId": "tsk_nope", "url": "https://x.example"})
	f.fails(CodeTaskNotFound, "ListTaskPushNotificationConfigs", map[string]any{"taskId": "tsk_nope"})
	f.fails(CodeTaskNotFound, "DeleteTaskPushNotificationConfig", map[string]any{"taskId": "tsk_nope", "id": "x"})
	for name, params := range map[string]map[string]any{
		"url":                           {"taskId": task.ID},
		"url (ftp)":                     {"taskId": task.ID, "url": "ftp://x.example"},
		"token":                         {"taskId": task.ID, "url": "https://x.example", "token": "a\r\nX-Evil: 1"},
		"authentication.scheme":         {"taskId": task.ID, "url": "https://x.example", "authentication": map[string]any{"scheme": "Two words", "credentials": "c"}},
		"authentication.credentials":    {"taskId": task.ID, "url": "https://x.example", "authentication": map[string]any{"scheme": "Bearer", "credentials": "é"}},
		"id":                            {"taskId": task.ID, "url": "https://x.example", "id": strings.Repeat("i", 201)},
		"taskId":                        {"url": "https://x.example"},
		"authentication.scheme (empty)": {"taskId": task.ID, "url": "https://x.example", "authentication": map[string]any{"credentials": "c"}},
	} {
		e := f.fails(CodeInvalidParams, "CreateTaskPushNotificationConfig", params)
		field, _, _ := strings.Cut(name, " ")
		require.True(t, strings.HasPrefix(e.Message, field+":"), "%s: %s", name, e.Message)
	}
}

func TestPushConfigPrivateAddresses(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.AllowPrivate = false })
	task := f.send(userMessage("pp-1", "hi"), nil)
	e := f.fails(CodeInvalidParams, "CreateTaskPushNotificationConfig", map[string]any{"taskId": task.ID, "url": "http://127.0.0.1:9/hook"})
	require.Contains(t, e.Message, "private address")
	require.Contains(t, e.Message, "does not push to private addresses")

	// A send whose push config is refused starts no task.
	e = f.fails(CodeInvalidParams, "SendMessage", map[string]any{"message": userMessage("pp-2", "hi"),
		"configuration": map[string]any{"taskPushNotificationConfig": map[string]any{"url": "http://localhost/hook"}}})
	require.True(t, strings.HasPrefix(e.Message, "configuration.taskPushNotificationConfig.url:"), e.Message)
	res, err := f.client.List(t.Context(), &errand.ListParams{})
	require.NoError(t, err)
	require.Len(t, res.Tasks, 1)
}

func TestPushConfigMethodsV03(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var task v03Task
	f.ok("message/send", map[string]any{"message": userMessageV03("p3-1", "hi")}, &task)

	var c v03TaskPushConfig
	f.ok("tasks/pushNotificationConfig/set", map[string]any{"taskId": task.ID, "pushNotificationConfig": map[string]any{
		"url": "https://hooks.example.com/a", "token": "t", "authentication": map[string]any{"schemes": []string{"Basic"}, "credentials": "dXNlcjpw"},
	}}, &c)
	require.Equal(t, task.ID, c.TaskID)
	require.Equal(t, task.ID, c.PushConfig.ID, "a v0.3 config without an id takes its task's")
	require.Equal(t, []string{"Basic"}, c.PushConfig.Authentication.Schemes)

	var got v03TaskPushConfig
	f.ok("tasks/pushNotificationConfig/get", map[string]any{"id": task.ID}, &got)
	require.Equal(t, c, got)
	f.ok("tasks/pushNotificationConfig/set", map[string]any{"taskId": task.ID, "pushNotificationConfig": map[string]any{"id": "two", "url": "https://hooks.example.com/b"}}, &c)
	f.ok("tasks/pushNotificationConfig/get", map[string]any{"id": task.ID, "pushNotificationConfigId": "two"}, &got)
	require.Equal(t, "https://hooks.example.com/b", got.PushConfig.URL)

	var list []v03TaskPushConfig
	f.ok("tasks/pushNotificationConfig/list", map[string]any{"id": task.ID}, &list)
	require.Len(t, list, 2)

	a := f.call("tasks/pushNotificationConfig/delete", map[string]any{"id": task.ID, "pushNotificationConfigId": "two"})
	require.Nil(t, a.Error)
	require.Equal(t, "null", string(a.Result))
	f.fails(CodeTaskNotFound, "tasks/pushNotificationConfig/get", map[string]any{"id": task.ID, "pushNotificationConfigId": "two"})
	f.fails(CodeInvalidParams, "tasks/pushNotificationConfig/delete", map[string]any{"id": task.ID})
	f.fails(CodeInvalidParams, "tasks/pushNotificationConfig/set", map[string]any{"taskId": task.ID})
	f.fails(CodeTaskNotFound, "tasks/pushNotificationConfig/list", map[string]any{"id": "tsk_nope"})
}

// pushReceiver records the pushes it gets.
type pushReceiver struct {
	srv *httptest.Server
	got chan receivedPush
}

type receivedPush struct {
	header http.Header
	body   []byte
}

func newPushReceiver(t *testing.T) *pushReceiver {
	t.Helper()
	r := &pushReceiver{got: make(chan receivedPush, 100)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.got <- receivedPush{header: req.Header.Clone(), body: b}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *pushReceiver) next(t *testing.T) receivedPush {
	t.Helper()
	select {
	case p := <-r.got:
		return p
	case <-time.After(waitTimeout):
		t.Fatal("no push")
		return receivedPush{}
	}
}

func (f *fixture) startPushes(t *testing.T) {
	t.Helper()
	f.startPushesWith(t, nil)
}

// startPushesWith starts the push dispatcher with cfg's TracerProvider
// and OnAttemptFunc (cfg may be nil).
func (f *fixture) startPushesWith(t *testing.T, cfg *webhook.PushConfig) {
	t.Helper()
	last, err := f.client.LastEventID(t.Context())
	require.NoError(t, err)
	require.NoError(t, f.client.SetCursor(t.Context(), webhook.PushCursor, last))
	c := webhook.PushConfig{Source: f.server.PushSource(), Journal: webhook.ClientJournal(f.client), AllowPrivate: true, Logger: f.server.log}
	if cfg != nil {
		c.TracerProvider, c.OnAttemptFunc = cfg.TracerProvider, cfg.OnAttemptFunc
	}
	d, err := webhook.NewPush(c)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = d.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func TestPushNotificationsV1(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rc := newPushReceiver(t)
	f.startPushes(t)
	msg := userMessage("pn-1", "fence")
	msg["metadata"] = map[string]any{"agent": "ask"}
	task := f.send(msg, map[string]any{"returnImmediately": true, "taskPushNotificationConfig": map[string]any{
		"url": rc.srv.URL + "/hook", "token": "tok-1", "authentication": map[string]any{"scheme": "Bearer", "credentials": "cred"},
	}})

	// States in order, each once, until the question.
	var states []string
	for len(states) == 0 || states[len(states)-1] != "TASK_STATE_INPUT_REQUIRED" {
		p := rc.next(t)
		require.Equal(t, "tok-1", p.header.Get(NotificationTokenHeader))
		require.Equal(t, "Bearer cred", p.header.Get("Authorization"))
		require.Equal(t, "application/a2a+json", p.header.Get("Content-Type"))
		require.NoError(t, webhook.Verify([]byte("tok-1"), p.header, p.body, time.Now(), 0), "signed with the token")
		var r v1StreamResponse
		require.NoError(t, json.Unmarshal(p.body, &r), string(p.body))
		require.NotNil(t, r.StatusUpdate, string(p.body))
		require.Equal(t, task.ID, r.StatusUpdate.TaskID)
		require.Equal(t, task.ContextID, r.StatusUpdate.ContextID)
		states = append(states, r.StatusUpdate.Status.State)
	}
	require.Equal(t, dedupe(states), states, "each change once")

	answer := userMessage("pn-2", "blue")
	answer["taskId"] = task.ID
	f.send(answer, nil)
	for {
		var r v1StreamResponse
		require.NoError(t, json.Unmarshal(rc.next(t).body, &r))
		if r.ArtifactUpdate != nil {
			require.Equal(t, "colour: blue", textOf(r.ArtifactUpdate.Artifact.Parts[0]))
			require.NoError(t, json.Unmarshal(rc.next(t).body, &r))
			require.Equal(t, "TASK_STATE_COMPLETED", r.StatusUpdate.Status.State, "the completion follows the artifact")
			break
		}
		require.NotEqual(t, "TASK_STATE_COMPLETED", r.StatusUpdate.Status.State, "the artifact comes first")
	}
}

func TestPushNotificationsV03(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rc := newPushReceiver(t)
	f.startPushes(t)
	var task v03Task
	f.ok("message/send", map[string]any{"message": userMessageV03("pn3-1", "hi"), "configuration": map[string]any{
		"blocking": false, "pushNotificationConfig": map[string]any{"url": rc.srv.URL + "/hook"},
	}}, &task)
	for {
		p := rc.next(t)
		require.Empty(t, p.header.Get(NotificationTokenHeader), "no token, no header")
		require.Empty(t, p.header.Get(webhook.HeaderSignature), "no token, unsigned")
		require.Equal(t, "application/json", p.header.Get("Content-Type"))
		var got v03Task
		require.NoError(t, json.Unmarshal(p.body, &got))
		require.Equal(t, "task", got.Kind, "v0.3 pushes the whole task")
		require.Equal(t, task.ID, got.ID)
		if got.Status.State == "completed" {
			require.Equal(t, "done: hi", *got.Artifacts[0].Parts[0].Text)
			require.Equal(t, "pn3-1", got.History[0].MessageID)
			break
		}
	}
}

func TestPushSourceTellsChangesOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	later := time.Now().Add(time.Hour)
	task, err := f.client.Submit(t.Context(), &errand.SubmitParams{Goal: "later", RunAt: &later})
	require.NoError(t, err)
	bare, err := f.client.Submit(t.Context(), &errand.SubmitParams{Goal: "no config", RunAt: &later})
	require.NoError(t, err)
	for _, c := range []*errand.PushConfig{
		{TaskID: task.ID, ID: "v1", URL: "https://a.example", ProtocolVersion: VersionV1},
		{TaskID: task.ID, ID: "v03", URL: "https://b.example", ProtocolVersion: VersionV03, Token: "whsec_dG9rZW4="},
	} {
		_, err := f.client.PutPushConfig(t.Context(), c)
		require.NoError(t, err)
	}
	src := f.server.PushSource()
	pushes := func(id int64, typ, taskID string) []*webhook.Push {
		t.Helper()
		out, err := src.Pushes(t.Context(), &errand.Event{ID: id, Type: typ, TaskID: taskID})
		require.NoError(t, err)
		return out
	}
	first := pushes(1, errand.EventTaskCreated, task.ID)
	require.Len(t, first, 2, "one push per config")
	require.NotEqual(t, first[0].Queue, first[1].Queue)
	byURL := map[string]*webhook.Push{}
	for _, p := range first {
		byURL[p.URL] = p
	}
	require.Equal(t, []byte("token"), byURL["https://b.example"].Key, "a whsec_ token is read as a webhook secret")
	require.Empty(t, byURL["https://a.example"].Key, "no token: unsigned")
	require.Equal(t, "application/json", byURL["https://b.example"].ContentType)
	require.Equal(t, "application/a2a+json", byURL["https://a.example"].ContentType)
	require.Empty(t, pushes(2, errand.EventTaskCreated, task.ID), "nothing changed: nothing pushed")
	require.Empty(t, pushes(3, errand.EventTaskStep, task.ID), "not a status event")
	require.Empty(t, pushes(4, errand.EventTaskCreated, bare.ID), "no config")
	require.Empty(t, pushes(5, errand.EventTaskCreated, "tsk_gone"), "no such task")

	_, err = f.client.Cancel(t.Context(), task.ID, "stop")
	require.NoError(t, err)
	last := pushes(6, errand.EventTaskCancelled, task.ID)
	require.Len(t, last, 2)
	var v1 v1StreamResponse
	if last[0].URL != "https://a.example" {
		last[0], last[1] = last[1], last[0]
	}
	require.NoError(t, json.Unmarshal(last[0].Body, &v1))
	require.Equal(t, "TASK_STATE_CANCELED", v1.StatusUpdate.Status.State)
	require.Equal(t, "6-", last[0].ID[:2], "the webhook-id names the event")
	require.NotEqual(t, last[0].ID, last[1].ID)
}

func TestPushConfigAfterTheTaskEnded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rc := newPushReceiver(t)
	f.startPushes(t)
	task := f.send(userMessage("pe-1", "quick"), nil)
	require.Equal(t, "TASK_STATE_COMPLETED", task.Status.State)
	f.ok("CreateTaskPushNotificationConfig", map[string]any{"taskId": task.ID, "url": rc.srv.URL + "/late"}, nil)
	// A config made after the last change still hears how the task ended.
	var r v1StreamResponse
	require.NoError(t, json.Unmarshal(rc.next(t).body, &r))
	require.NotNil(t, r.ArtifactUpdate)
	require.Equal(t, "done: quick", textOf(r.ArtifactUpdate.Artifact.Parts[0]))
	require.NoError(t, json.Unmarshal(rc.next(t).body, &r))
	require.Equal(t, "TASK_STATE_COMPLETED", r.StatusUpdate.Status.State)
}
