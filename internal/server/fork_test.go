package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
)

// A fork body is read strictly: what cannot be a fork request is a 400
// naming its field, before the source task is looked at.
func TestForkRefusesMalformedBodies(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	task := f.submit(`{"goal":"g"}`)
	for _, tc := range []struct{ body, code, field string }{
		{``, api.CodeBadRequest, ""},
		{`[]`, api.CodeBadRequest, ""},
		{`{"from_step":1} {}`, api.CodeBadRequest, ""},
		{`{"from_step":1,"colour":"red"}`, api.CodeBadRequest, "colour"},
		{`{"from_step":"3"}`, api.CodeBadRequest, "from_step"},
		{`{"from_step":1.5}`, api.CodeBadRequest, "from_step"},
		{`{}`, api.CodeInvalid, "from_step"},
		{`{"from_step":null}`, api.CodeInvalid, "from_step"},
		{`{"from_step":0}`, api.CodeInvalid, "from_step"},
		{`{"from_step":-2}`, api.CodeInvalid, "from_step"},
		{`{"from_step":1,"answer":"  "}`, api.CodeInvalid, "answer"},
		{`{"from_step":1,"answer":"` + strings.Repeat("a", 64<<10+1) + `"}`, api.CodeInvalid, "answer"},
		{`{"from_step":1,"answer":"a\u0000b"}`, api.CodeInvalid, "answer"},
		{`{"from_step":1,"goal":"\u001b[2J"}`, api.CodeInvalid, "goal"},
		{`{"from_step":1,"input":[1]}`, api.CodeInvalid, "input"},
		{`{"from_step":1,"input":"text"}`, api.CodeInvalid, "input"},
		{`{"from_step":1,"budget":{"max_tokens":"many"}}`, api.CodeBadRequest, "budget.max_tokens"},
	} {
		res, body := f.do("POST", "/api/tasks/"+task.ID+"/fork", tc.body)
		e := requireError(t, res, body, http.StatusBadRequest, tc.code)
		require.Equal(t, tc.field, e.Field, tc.body)
	}
	res, body := f.do("GET", "/api/tasks/"+task.ID+"/fork", "")
	requireError(t, res, body, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed)
}

func TestForkParamsKeepWhatTheBodyLeavesOut(t *testing.T) {
	t.Parallel()
	three, answer := 3, "blue"
	p, err := ForkParams(&api.ForkTask{FromStep: &three, Input: json.RawMessage(` null `)})
	require.NoError(t, err)
	require.Equal(t, &errand.ForkParams{FromStep: 3}, p)

	budget := &errand.Budget{MaxTokens: 10}
	p, err = ForkParams(&api.ForkTask{FromStep: &three, Goal: "g", Input: json.RawMessage(`{"a":1}`), Answer: &answer, Agent: "other", Budget: budget})
	require.NoError(t, err)
	require.Equal(t, &errand.ForkParams{FromStep: 3, Goal: "g", Input: json.RawMessage(`{"a":1}`), Answer: &answer, Agent: "other", Budget: budget}, p)
}

// stepsAgent records three steps, telling calls each one it runs.
func stepsAgent(calls chan<- int) errand.Agent {
	return errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
		for n := 1; n <= 3; n++ {
			if _, err := run.Step(ctx, n, "count", func(context.Context, string) (any, error) {
				calls <- n
				return n, nil
			}); err != nil {
				return errand.Result{}, err
			}
		}
		return errand.Result{Output: "done"}, nil
	})
}

// A fork over HTTP: 201 with the new task, which names its source; its
// copied steps say where they come from; the source is not touched.
// Unknown tasks are 404s, and a step the source has not done a 422.
func TestForkOverHTTP(t *testing.T) {
	t.Parallel()
	calls := make(chan int, 16)
	f := newFixture(t, map[string]errand.Agent{"default": stepsAgent(calls)})
	src := f.submit(`{"goal":"three steps"}`)
	events, _ := f.openStream(t.Context(), "/api/tasks/"+src.ID+"/events", "")
	waitFor(t, events, "task.completed")
	for range 3 {
		<-calls
	}

	res, body := f.do("POST", "/api/tasks/"+unknownID+"/fork", `{"from_step":1}`)
	e := requireError(t, res, body, http.StatusNotFound, api.CodeNotFound)
	require.Contains(t, e.Message, unknownID)

	res, body = f.do("POST", "/api/tasks/"+src.ID+"/fork", `{"from_step":99}`)
	e = requireError(t, res, body, http.StatusUnprocessableEntity, api.CodeInvalid)
	require.Equal(t, "from_step", e.Field)

	res, body = f.do("POST", "/api/tasks/"+src.ID+"/fork", `{"from_step":2,"answer":"blue"}`)
	e = requireError(t, res, body, http.StatusUnprocessableEntity, api.CodeInvalid)
	require.Equal(t, "answer", e.Field, "the source asked no question")

	res, body = f.do("POST", "/api/tasks/"+src.ID+"/fork", `{"from_step":3,"goal":"three steps, again"}`)
	require.Equal(t, http.StatusCreated, res.StatusCode, string(body))
	var fork api.Task
	require.NoError(t, json.Unmarshal(body, &fork))
	require.NotEqual(t, src.ID, fork.ID)
	require.Equal(t, "/api/tasks/"+fork.ID, res.Header.Get("Location"))
	require.Equal(t, &errand.ForkRef{TaskID: src.ID, StepNo: 3}, fork.ForkedFrom)
	require.Equal(t, "three steps, again", fork.Goal)

	forkEvents, _ := f.openStream(t.Context(), "/api/tasks/"+fork.ID+"/events", "")
	waitFor(t, forkEvents, "task.completed")
	require.Equal(t, 3, <-calls, "the fork runs step 3 alone")

	res, body = f.do("GET", "/api/tasks/"+fork.ID+"/steps", "")
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	var steps api.StepList
	require.NoError(t, json.Unmarshal(body, &steps))
	copied := map[int]bool{}
	for _, st := range steps.Steps {
		if st.CopiedFrom != nil {
			require.Equal(t, src.ID, *st.CopiedFrom)
			copied[st.StepNo] = true
		}
	}
	require.Equal(t, map[int]bool{1: true, 2: true}, copied)

	// The source lists its forks, oldest first; only GET /api/tasks/{id}
	// does, and a task without any lists none.
	res, body = f.do("POST", "/api/tasks/"+src.ID+"/fork", `{"from_step":1}`)
	require.Equal(t, http.StatusCreated, res.StatusCode, string(body))
	var second api.Task
	require.NoError(t, json.Unmarshal(body, &second))
	res, body = f.do("GET", "/api/tasks/"+src.ID, "")
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	var again api.Task
	require.NoError(t, json.Unmarshal(body, &again))
	require.Nil(t, again.ForkedFrom)
	require.Equal(t, errand.StatusCompleted, again.Status)
	require.Equal(t, []string{fork.ID, second.ID}, again.Forks)
	_, body = f.do("GET", "/api/tasks/"+fork.ID, "")
	require.Contains(t, string(body), `"forks":[]`)
	res, body = f.do("GET", "/api/tasks?forked_from="+src.ID, "")
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	require.NotContains(t, string(body), `"forks"`)
	var list api.TaskList
	require.NoError(t, json.Unmarshal(body, &list))
	require.Len(t, list.Tasks, 2)
	require.Equal(t, []string{second.ID, fork.ID}, []string{list.Tasks[0].ID, list.Tasks[1].ID}, "newest first, as every list")
}

// FuzzForkBody posts arbitrary bodies to POST /api/tasks/{id}/fork: every
// answer is a 201 with a task or a 4xx with a JSON error, never a 500 or a
// panic, and a refused body writes nothing.
func FuzzForkBody(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `null`, `[]`, `{"from_step":1}`, `{"from_step":0}`, `{"from_step":-1}`, `{"from_step":1e99}`,
		`{"from_step":"1"}`, `{"from_step":1,"goal":"again"}`, `{"from_step":1,"goal":"\u0000"}`,
		`{"from_step":1,"answer":""}`, `{"from_step":1,"answer":"yes"}`, `{"from_step":2,"answer":"yes"}`,
		`{"from_step":1,"input":{"a":[1]}}`, `{"from_step":1,"input":"x"}`, `{"from_step":1,"input":null}`,
		`{"from_step":1,"agent":"nobody"}`, `{"from_step":1,"agent":"ask"}`,
		`{"from_step":1,"budget":{"max_tokens":-5}}`, `{"from_step":1,"budget":{"max_cost_usd":1}}`,
		`{"from_step":1,"from_step":2}`, `{"From_Step":1}`, "{\"from_step\":1,\"goal\":\"\xff\"}",
	} {
		for which := range uint8(5) {
			f.Add(which, []byte(seed))
		}
	}
	b := newFuzzBundle(f)

	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		path := "/api/tasks/" + b.ids[int(which)%len(b.ids)] + "/fork"
		before := b.dataVersion(t)
		req := httptest.NewRequest("POST", path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		rec := httptest.NewRecorder()
		b.handler.ServeHTTP(rec, req)
		require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
		if rec.Code == http.StatusCreated {
			var task api.Task
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &task))
			require.NotNil(t, task.ForkedFrom)
			return
		}
		require.GreaterOrEqual(t, rec.Code, 400, rec.Body.String())
		require.Less(t, rec.Code, 500, "%s %q: %s", path, body, rec.Body.String())
		require.Equal(t, before, b.dataVersion(t), "refused %q changed the store", body)
		var e api.ErrorBody
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e))
		require.NotEmpty(t, e.Error.Code)
		require.NotEmpty(t, e.Error.Message)
	})
}
