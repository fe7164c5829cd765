package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
)

func TestTasksFork(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	fork := &api.Task{ID: "tsk_2", Status: errand.StatusPending, ForkedFrom: &errand.ForkRef{TaskID: "tsk_1", StepNo: 3}}
	f.reply("POST /api/tasks/tsk_1/fork", 201, fork)
	f.mux.HandleFunc("POST /api/tasks/tsk_gone/fork", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, 404, api.CodeNotFound, "no task tsk_gone")
	})

	r := cli(t, testEnv(nil), f.args("tasks", "fork", "tsk_1", "--from-step", "3")...)
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, "tsk_2\n", r.stdout, "the new task's id, as ask prints it")
	reqs := f.requests("/api/tasks/tsk_1/fork")
	require.Len(t, reqs, 1)
	require.JSONEq(t, `{"from_step":3}`, reqs[0].Body)

	e := testEnv(nil)
	e.stdin = strings.NewReader("green\n")
	r = cli(t, e, f.args("tasks", "fork", "tsk_1", "--from-step", "2", "--goal", "paint it", "--answer", "-",
		"--agent", "painter", "--input", `{"coats":2}`, "--json")...)
	require.NoError(t, r.err, r.stderr)
	var got api.Task
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	require.Equal(t, fork.ForkedFrom, got.ForkedFrom)
	reqs = f.requests("/api/tasks/tsk_1/fork")
	require.JSONEq(t, `{"from_step":2,"goal":"paint it","answer":"green","agent":"painter","input":{"coats":2}}`, reqs[1].Body)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tasks", "fork", "tsk_1"}, "--from-step is required"},
		{[]string{"tasks", "fork", "tsk_1", "--from-step", "0"}, "--from-step 0: must be 1 or more"},
		{[]string{"tasks", "fork", "tsk_1", "--from-step", "x"}, `invalid argument "x" for "--from-step"`},
		{[]string{"tasks", "fork", "tsk_1", "--from-step", "1", "--answer", " "}, "--answer: the answer is empty"},
		{[]string{"tasks", "fork", "tsk_1", "--from-step", "1", "--input", "{"}, "--input: not valid JSON"},
		{[]string{"tasks", "fork", "tsk_gone", "--from-step", "1"}, "fork tsk_gone: no task tsk_gone (not_found, HTTP 404)"},
	} {
		r := cli(t, testEnv(nil), f.args(tc.args...)...)
		require.Error(t, r.err, tc.args)
		require.Empty(t, r.stdout, tc.args)
		require.Contains(t, r.stderr, tc.want, tc.args)
	}
	require.Len(t, f.requests("/api/tasks/tsk_1/fork"), 2, "nothing is sent for a refused command line")
}

// tasks show names a fork's source and its forks, and marks the steps it
// copied.
func TestTasksShowFork(t *testing.T) {
	t.Parallel()
	f := newFakeDaemon(t)
	f.reply("GET /api/tasks/tsk_2", 200, &api.Task{ID: "tsk_2", Goal: "g", Status: errand.StatusRunning,
		ForkedFrom: &errand.ForkRef{TaskID: "tsk_1", StepNo: 2}, Forks: []string{"tsk_3", "tsk_4"}})
	f.reply("GET /api/tasks/tsk_2/steps", 200, api.StepList{Steps: []*api.Step{
		{StepNo: 1, Type: "llm_call", Status: "done", CopiedFrom: ptr("tsk_1"), TokensIn: 10, TokensOut: 5, CostUSD: 0.01, DurationMS: 100},
		{StepNo: 2, Type: "llm_call", Status: "done", TokensIn: 10, TokensOut: 5, CostUSD: 0.01, DurationMS: 100},
	}})
	r := cli(t, testEnv(nil), f.args("tasks", "show", "tsk_2")...)
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, "Forked from  tsk_1 at step 2\n")
	require.Contains(t, r.stdout, "Forks        tsk_3, tsk_4\n")
	lines := strings.Split(r.stdout, "\n")
	var copied, own string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "  1 "):
			copied = l
		case strings.HasPrefix(l, "  2 "):
			own = l
		}
	}
	require.Contains(t, copied, "done (copied from tsk_1)")
	require.NotContains(t, own, "copied")
}
