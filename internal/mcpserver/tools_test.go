package mcpserver

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/id"
)

func TestToolsList(t *testing.T) {
	t.Parallel()
	b := setup(t, "local")
	res, err := b.session.ListTools(t.Context(), nil)
	require.NoError(t, err)
	schemas := map[string]map[string]any{}
	for _, tool := range res.Tools {
		require.NotEmpty(t, tool.Description, tool.Name)
		data, err := json.Marshal(tool.InputSchema)
		require.NoError(t, err)
		var s map[string]any
		require.NoError(t, json.Unmarshal(data, &s))
		schemas[tool.Name] = s
	}
	require.ElementsMatch(t, []string{"submit_task", "get_task_status", "list_tasks", "cancel_task", "answer_task", "wait_for_task", "fork_task"},
		slices.Collect(func(yield func(string) bool) {
			for name := range schemas {
				if !yield(name) {
					return
				}
			}
		}))
	required := func(tool string) []any { return schemas[tool]["required"].([]any) }
	props := func(tool string) map[string]any { return schemas[tool]["properties"].(map[string]any) }
	require.Equal(t, []any{"goal"}, required("submit_task"))
	require.ElementsMatch(t, []string{"goal", "title", "agent", "priority", "session_id", "parent_id", "depends_on", "input", "idempotency_key",
		"concurrency_key", "debounce"}, keys(props("submit_task")))
	require.Equal(t, []any{"null", "object"}, props("submit_task")["input"].(map[string]any)["type"])
	require.Equal(t, []any{"task_id", "answer"}, required("answer_task"))
	require.Equal(t, []any{"task_id", "from_step"}, required("fork_task"))
	require.ElementsMatch(t, []string{"task_id", "from_step", "goal", "answer", "agent", "input"}, keys(props("fork_task")))
	require.EqualValues(t, 1, props("fork_task")["from_step"].(map[string]any)["minimum"])
	wait := props("wait_for_task")["timeout_seconds"].(map[string]any)
	require.EqualValues(t, 300, wait["maximum"])
	require.Nil(t, wait["default"], "the SDK's defaulting panics on null arguments")
	require.EqualValues(t, 100, props("list_tasks")["limit"].(map[string]any)["maximum"])
	require.Contains(t, props("list_tasks")["status"].(map[string]any)["items"].(map[string]any)["enum"], "input_required")
	for name, s := range schemas {
		require.Equal(t, false, s["additionalProperties"], "%s must refuse unknown arguments", name)
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestSubmitAndGet(t *testing.T) {
	t.Parallel()
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := setup(t, kind)
			parent := b.submit(map[string]any{"goal": "parent", "agent": "gate"})
			dep := b.submit(map[string]any{"goal": "dependency", "agent": "gate"})
			res := b.call("submit_task", map[string]any{
				"goal": "Summarise the week", "title": "Weekly summary", "agent": "data", "priority": 7,
				"session_id": "s1", "parent_id": parent.ID, "depends_on": []string{dep.ID},
				"input": map[string]any{"week": 47}, "idempotency_key": "week-47",
			})
			task := res.Task
			require.True(t, id.Valid(id.Task, task.ID))
			require.Equal(t, "Weekly summary", task.Title)
			require.Equal(t, "Summarise the week", task.Goal)
			require.Equal(t, "data", task.Agent)
			require.Equal(t, 7, task.Priority)
			require.Equal(t, "s1", *task.SessionID)
			require.Equal(t, parent.ID, *task.ParentID)
			require.Equal(t, []string{dep.ID}, task.DependsOn)
			require.JSONEq(t, `{"week":47}`, string(task.Input))
			require.Equal(t, errand.StatusBlocked, task.Status)
			require.False(t, *res.Duplicate)

			// A retry with the same key gets the same task back.
			again := b.call("submit_task", map[string]any{"goal": "Summarise the week", "agent": "data", "parent_id": parent.ID, "idempotency_key": "week-47"})
			require.Equal(t, task.ID, again.Task.ID)
			require.True(t, *again.Duplicate)
			// The same key for something else is refused.
			msg := b.callErr("submit_task", map[string]any{"goal": "Something else", "idempotency_key": "week-47"})
			require.Contains(t, msg, "idempotency_key")
			require.Contains(t, msg, task.ID)

			got := b.call("get_task_status", map[string]any{"task_id": task.ID})
			require.Equal(t, task.ID, got.Task.ID)
			require.Equal(t, errand.StatusBlocked, got.Task.Status)
			require.Nil(t, got.Question)
			require.Nil(t, got.TimedOut)

			// A task that runs to the end shows its output.
			done := b.submit(map[string]any{"goal": "say hi"})
			b.waitDone(done.ID)
			res = b.call("get_task_status", map[string]any{"task_id": done.ID})
			require.Equal(t, errand.StatusCompleted, res.Task.Status)
			require.JSONEq(t, `{"output":"done: say hi","warning":null}`, string(res.Task.Result))
			close(b.gateRelease)
		})
	}
}

func TestSubmitSummary(t *testing.T) {
	t.Parallel()
	b := setup(t, "local")
	res := b.callRaw(&mcp.CallToolParams{Name: "submit_task", Arguments: map[string]any{"goal": "tell me\nmore", "agent": "gate"}})
	require.False(t, res.IsError)
	summary := res.Content[0].(*mcp.TextContent).Text
	require.Contains(t, summary, "Submitted task tsk_")
	require.Contains(t, summary, "“tell me”")
	require.Contains(t, summary, "wait_for_task")
	close(b.gateRelease)
}

func TestSubmitBadArguments(t *testing.T) {
	t.Parallel()
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := setup(t, kind)
			for _, tc := range []struct {
				name string
				args map[string]any
				want []string
			}{
				{"no goal", map[string]any{"title": "t"}, []string{`invalid arguments: required: missing properties: ["goal"]`}},
				{"blank goal", map[string]any{"goal": "   "}, []string{"goal", "required"}},
				{"goal too long", map[string]any{"goal": strings.Repeat("x", 64<<10+1)}, []string{"goal", "65537 bytes", "65536"}},
				{"goal with control characters", map[string]any{"goal": "a\x00b"}, []string{"goal"}},
				{"goal not a string", map[string]any{"goal": 5}, []string{`invalid arguments: goal: type: 5 has type "integer", want "string"`}},
				{"priority too high", map[string]any{"goal": "g", "priority": 10}, []string{"invalid arguments: priority: maximum"}},
				{"priority not an integer", map[string]any{"goal": "g", "priority": 1.5}, []string{"priority"}},
				{"bad parent", map[string]any{"goal": "g", "parent_id": "tsk_nope"}, []string{"parent_id", `"tsk_nope" is not a task id`}},
				{"unknown parent", map[string]any{"goal": "g", "parent_id": id.New(id.Task)}, []string{"parent"}},
				{"bad dependency", map[string]any{"goal": "g", "depends_on": []string{"x"}}, []string{"depends_on", `"x" is not a task id`}},
				{"input not an object", map[string]any{"goal": "g", "input": []int{1}}, []string{"input"}},
				{"input too large", map[string]any{"goal": "g", "input": map[string]any{"x": strings.Repeat("y", 256<<10)}}, []string{"input"}},
				{"unknown agent", map[string]any{"goal": "g", "agent": "nobody"}, []string{"agent", `"nobody" is not a registered agent`}},
				{"unknown argument", map[string]any{"goal": "g", "colour": "red"}, []string{`invalid arguments: unexpected additional properties ["colour"]`}},
			} {
				msg := b.callErr("submit_task", tc.args)
				for _, want := range tc.want {
					require.Contains(t, msg, want, tc.name)
				}
			}
			list := b.call("list_tasks", map[string]any{})
			require.Empty(t, list.Tasks, "a refused submit writes nothing")
		})
	}
}

func TestGetTaskErrors(t *testing.T) {
	t.Parallel()
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := setup(t, kind)
			unknown := id.New(id.Task)
			require.Contains(t, b.callErr("get_task_status", map[string]any{"task_id": unknown}), "no task "+unknown)
			require.Contains(t, b.callErr("get_task_status", map[string]any{"task_id": "tsk_1"}), "task_id")
			require.Contains(t, b.callErr("get_task_status", map[string]any{}), "task_id")
			require.Contains(t, b.callErr("get_task_status", map[string]any{"task_id": 7}), "task_id")
		})
	}
}

func TestListTasks(t *testing.T) {
	t.Parallel()
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := setup(t, kind)
			var ids []string
			for i := range 5 {
				session := "a"
				if i%2 == 1 {
					session = "b"
				}
				task := b.submit(map[string]any{"goal": "task " + string(rune('0'+i)), "session_id": session})
				b.waitDone(task.ID)
				ids = append(ids, task.ID)
			}
			gated := b.submit(map[string]any{"goal": "held", "agent": "gate"})

			all := b.call("list_tasks", map[string]any{})
			require.Len(t, all.Tasks, 6)
			require.Equal(t, gated.ID, all.Tasks[0].ID, "newest first")
			require.Empty(t, all.NextCursor)

			page := b.call("list_tasks", map[string]any{"status": []string{"completed"}, "limit": 2})
			require.Equal(t, []string{ids[4], ids[3]}, taskIDs(page.Tasks))
			require.NotEmpty(t, page.NextCursor)
			page = b.call("list_tasks", map[string]any{"status": []string{"completed"}, "limit": 2, "cursor": page.NextCursor})
			require.Equal(t, []string{ids[2], ids[1]}, taskIDs(page.Tasks))

			session := b.call("list_tasks", map[string]any{"session_id": "b"})
			require.Equal(t, []string{ids[3], ids[1]}, taskIDs(session.Tasks))

			none := b.call("list_tasks", map[string]any{"status": []string{"failed"}})
			require.NotNil(t, none.Tasks)
			require.Empty(t, none.Tasks)

			require.Contains(t, b.callErr("list_tasks", map[string]any{"status": []string{"done"}}), "status")
			require.Contains(t, b.callErr("list_tasks", map[string]any{"limit": 101}), "limit")
			require.Contains(t, b.callErr("list_tasks", map[string]any{"limit": 0}), "limit")
			require.Contains(t, b.callErr("list_tasks", map[string]any{"cursor": "not-a-cursor"}), "cursor")
			require.Contains(t, b.callErr("list_tasks", map[string]any{"cursor": strings.Repeat("c", 201)}), "cursor")
			require.Contains(t, b.callErr("list_tasks", map[string]any{"session_id": strings.Repeat("s", 201)}), "session_id")
			close(b.gateRelease)
		})
	}
}

func taskIDs(ts []*api.Task) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}
