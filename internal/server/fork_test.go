package server

import (
	"encoding/json"
	"net/http"
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
