package a2a

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
)

// A field a method's params do not have is -32602 naming it, and nothing
// is written: v0.3's pushNotificationConfig on v1.0's SendMessage would
// otherwise make the task and drop the push config.
func TestUnknownParamsAreRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	held := userMessage("known-task", "hello")
	held["metadata"] = map[string]any{"agent": "slow"}
	task := f.send(held, map[string]any{"returnImmediately": true})
	f.waitStarted()
	f.ok("CreateTaskPushNotificationConfig", map[string]any{"taskId": task.ID, "id": "p1", "url": "https://hooks.example/a"}, nil)

	before, err := f.client.List(t.Context(), &errand.ListParams{Limit: 100})
	require.NoError(t, err)
	for _, c := range []struct {
		method string
		params map[string]any
		field  string
	}{
		{"SendMessage", map[string]any{"message": userMessage("m-1", "hi"),
			"configuration": map[string]any{"pushNotificationConfig": map[string]any{"url": "https://hooks.example/x"}}}, "configuration.pushNotificationConfig"},
		{"SendMessage", map[string]any{"message": userMessage("m-2", "hi"), "configuration": map[string]any{"blocking": false}}, "configuration.blocking"},
		{"SendMessage", map[string]any{"message": map[string]any{"kind": "message", "messageId": "m-3", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "hi"}}}}, "message.kind"},
		{"SendMessage", map[string]any{"message": map[string]any{"messageId": "m-4", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "hi", "kind": "text"}}}}, "message.parts[0].kind"},
		{"SendMessage", map[string]any{"message": userMessage("m-5", "hi"), "bogus": 1}, "bogus"},
		{"SendStreamingMessage", map[string]any{"message": userMessage("m-6", "hi"), "configuration": map[string]any{"taskPushNotificationConfig": map[string]any{"url": "https://hooks.example/x", "pushNotificationConfigId": "x"}}}, "configuration.taskPushNotificationConfig.pushNotificationConfigId"},
		{"message/send", map[string]any{"message": userMessageV03("m-7", "hi"), "configuration": map[string]any{"taskPushNotificationConfig": map[string]any{"url": "https://hooks.example/x"}}}, "configuration.taskPushNotificationConfig"},
		{"message/send", map[string]any{"message": userMessageV03("m-8", "hi"), "configuration": map[string]any{"returnImmediately": true}}, "configuration.returnImmediately"},
		{"message/stream", map[string]any{"message": userMessageV03("m-9", "hi"), "tenant": "t"}, "tenant"},
		{"GetTask", map[string]any{"id": task.ID, "metadata": map[string]any{}}, "metadata"},
		{"tasks/get", map[string]any{"id": task.ID, "tenant": "t"}, "tenant"},
		{"ListTasks", map[string]any{"contextID_": "x"}, "contextID_"},
		{"CancelTask", map[string]any{"id": task.ID, "historyLength": 1}, "historyLength"},
		{"tasks/cancel", map[string]any{"id": task.ID, "reason": "x"}, "reason"},
		{"SubscribeToTask", map[string]any{"id": task.ID, "since": 1}, "since"},
		{"tasks/resubscribe", map[string]any{"id": task.ID, "historyLength": 1}, "historyLength"},
		{"CreateTaskPushNotificationConfig", map[string]any{"taskId": task.ID, "url": "https://hooks.example/y", "pushNotificationConfig": map[string]any{}}, "pushNotificationConfig"},
		{"CreateTaskPushNotificationConfig", map[string]any{"taskId": task.ID, "url": "https://hooks.example/y", "authentication": map[string]any{"schemes": []string{"Bearer"}}}, "authentication.schemes"},
		{"tasks/pushNotificationConfig/set", map[string]any{"taskId": task.ID, "pushNotificationConfig": map[string]any{"url": "https://hooks.example/y", "authentication": map[string]any{"scheme": "Bearer"}}}, "pushNotificationConfig.authentication.scheme"},
		{"tasks/pushNotificationConfig/set", map[string]any{"taskId": task.ID, "url": "https://hooks.example/y"}, "url"},
		{"GetTaskPushNotificationConfig", map[string]any{"taskId": task.ID, "id": "p1", "pushNotificationConfigId": "p1"}, "pushNotificationConfigId"},
		{"tasks/pushNotificationConfig/get", map[string]any{"id": task.ID, "taskId": task.ID}, "taskId"},
		{"ListTaskPushNotificationConfigs", map[string]any{"taskId": task.ID, "limit": 1}, "limit"},
		{"tasks/pushNotificationConfig/list", map[string]any{"id": task.ID, "pageSize": 1}, "pageSize"},
		{"DeleteTaskPushNotificationConfig", map[string]any{"taskId": task.ID, "id": "p1", "force": true}, "force"},
		{"tasks/pushNotificationConfig/delete", map[string]any{"id": task.ID, "pushNotificationConfigId": "p1", "taskId": task.ID}, "taskId"},
		{"GetExtendedAgentCard", map[string]any{"full": true}, "full"},
		{"SendMessage", map[string]any{"message": userMessage("m-10", "hi"), strings.Repeat("k", 1000): 1}, strings.Repeat("k", 64) + "…"},
	} {
		e := f.fails(CodeInvalidParams, c.method, c.params)
		require.Contains(t, e.Message, c.field, "%s: %s", c.method, e.Message)
		require.Contains(t, e.Message, "unknown field", "%s", c.method)
		require.Less(t, len(e.Message), 400, "%s", c.method)
		var data map[string]string
		require.NoError(t, json.Unmarshal(e.Data, &data))
		require.Equal(t, c.field, data["field"], c.method)
	}
	after, err := f.client.List(t.Context(), &errand.ListParams{Limit: 100})
	require.NoError(t, err)
	require.Len(t, after.Tasks, len(before.Tasks), "a refused send made a task")
	require.Equal(t, errand.StatusRunning, func() errand.Status {
		got, err := f.client.Get(t.Context(), task.ID)
		require.NoError(t, err)
		return got.Status
	}(), "a refused cancel cancelled")
	configs, err := f.client.PushConfigs(t.Context(), task.ID, "", 10)
	require.NoError(t, err)
	require.Len(t, configs, 1, "a refused set or delete changed the push configs")
}

// Each version's own field names, every one its params have, are served
// under its method names.
func TestEveryKnownParamIsAccepted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	meta := map[string]any{"agent": "slow"}
	v1msg := map[string]any{"messageId": "k-1", "contextId": "c-1", "role": "ROLE_USER", "metadata": meta,
		"extensions": []string{"urn:x"}, "referenceTaskIds": []string{},
		"parts": []any{map[string]any{"text": "hi", "metadata": map[string]any{}, "filename": "", "mediaType": "text/plain"}}}
	var sent sendResult
	f.ok("SendMessage", map[string]any{"tenant": "", "message": v1msg, "metadata": map[string]any{},
		"configuration": map[string]any{"acceptedOutputModes": []string{"text/plain"}, "historyLength": 1, "returnImmediately": true,
			"taskPushNotificationConfig": map[string]any{"tenant": "", "id": "c1", "taskId": "", "url": "https://hooks.example/1", "token": "t",
				"authentication": map[string]any{"scheme": "Bearer", "credentials": "c"}}}}, &sent)
	id := sent.Task.ID
	f.ok("GetTask", map[string]any{"tenant": "", "id": id, "historyLength": 1}, nil)
	f.ok("ListTasks", map[string]any{"tenant": "", "contextId": "c-1", "status": "TASK_STATE_SUBMITTED", "pageSize": 1, "pageToken": "",
		"historyLength": 1, "statusTimestampAfter": "2026-01-01T00:00:00Z", "includeArtifacts": true}, nil)
	f.ok("GetTaskPushNotificationConfig", map[string]any{"tenant": "", "taskId": id, "id": "c1"}, nil)
	f.ok("ListTaskPushNotificationConfigs", map[string]any{"tenant": "", "taskId": id, "pageSize": 1, "pageToken": ""}, nil)
	f.ok("DeleteTaskPushNotificationConfig", map[string]any{"tenant": "", "taskId": id, "id": "c1"}, nil)
	f.ok("CancelTask", map[string]any{"tenant": "", "id": id, "metadata": map[string]any{}}, nil)

	v03msg := map[string]any{"kind": "message", "messageId": "k-2", "contextId": "c-2", "role": "user", "metadata": meta,
		"extensions": []string{}, "referenceTaskIds": []string{},
		"parts": []any{map[string]any{"kind": "text", "text": "hi", "metadata": map[string]any{}},
			map[string]any{"kind": "data", "data": map[string]any{"a": 1}, "metadata": map[string]any{}}}}
	var task v03Task
	f.ok("message/send", map[string]any{"message": v03msg, "metadata": map[string]any{},
		"configuration": map[string]any{"acceptedOutputModes": []string{"text/plain"}, "blocking": false, "historyLength": 1,
			"pushNotificationConfig": map[string]any{"id": "c2", "url": "https://hooks.example/2", "token": "t",
				"authentication": map[string]any{"schemes": []string{"Bearer"}, "credentials": "c"}}}}, &task)
	id = task.ID
	f.ok("tasks/get", map[string]any{"id": id, "historyLength": 1, "metadata": map[string]any{}}, nil)
	f.ok("tasks/pushNotificationConfig/set", map[string]any{"taskId": id, "pushNotificationConfig": map[string]any{"id": "c3", "url": "https://hooks.example/3"}}, nil)
	f.ok("tasks/pushNotificationConfig/get", map[string]any{"id": id, "metadata": map[string]any{}, "pushNotificationConfigId": "c3"}, nil)
	f.ok("tasks/pushNotificationConfig/list", map[string]any{"id": id, "metadata": map[string]any{}}, nil)
	f.ok("tasks/pushNotificationConfig/delete", map[string]any{"id": id, "metadata": map[string]any{}, "pushNotificationConfigId": "c3"}, nil)
	f.ok("tasks/cancel", map[string]any{"id": id, "metadata": map[string]any{}}, nil)
}
