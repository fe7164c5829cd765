package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
)

// FuzzCreateTask posts arbitrary bodies to POST /api/tasks: every answer is
// a 201 with a task or a 4xx with a JSON error, never a 500 or a panic.
func FuzzCreateTask(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `null`, `[]`, `"goal"`, `{"goal":"x"}`, `{"goal":`, `{"goal":"x"}garbage`,
		`{"goal":"x","priority":-1}`, `{"goal":"x","priority":1e99}`, `{"goal":"x","priority":"5"}`,
		`{"goal":"x","input":"string"}`, `{"goal":"x","input":{"a":[1,2,{"b":null}]}}`,
		`{"goal":"x","metadata":[]}`, `{"goal":"x","tags":[1]}`, `{"goal":"x","tags":null}`,
		`{"goal":"x","run_at":"yesterday"}`, `{"goal":"x","run_at":"2026-01-01T00:00:00Z"}`,
		`{"goal":"x","budget":{"max_tokens":-5}}`, `{"goal":"x","budget":{"max_wall_clock":5}}`,
		`{"goal":"x","budget":{"max_cost_usd":"NaN"}}`, `{"goal":"x","depends_on":["tsk_nope"]}`,
		`{"goal":"x","parent_id":"../../etc"}`, `{"goal":"x","on_dependency_failure":"maybe"}`,
		`{"goal":"x","max_attempts":-1}`, `{"goal":"x","max_steps":-3}`, `{"goal":"x","result_route":"email"}`,
		`{"goal":"\u0000"}`, "{\"goal\":\"\xff\xfe\"}", `{"goal":"x","tools":[""]}`, `{"goal":"x","goal":"y"}`,
		`{"goal":"x","idempotency_key":"` + strings.Repeat("k", 5000) + `"}`,
		`{"goal":"x","session_id":"` + strings.Repeat("s", 5000) + `"}`,
		`{"goal":"x","agent":"nobody"}`, `{"Goal":"x"}`, `{"goal":"x","input":{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}}`,
	} {
		f.Add([]byte(seed))
	}
	c, err := errand.Open(f.Context(), filepath.Join(f.TempDir(), "errand.db"), &errand.Config{
		Agents: map[string]errand.Agent{"default": errand.AgentFunc(nil)},
	})
	require.NoError(f, err)
	f.Cleanup(func() { c.Close() })
	h := New(Config{Client: c, Token: testToken}).Handler()

	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest("POST", "/api/tasks", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+testToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
		if rec.Code == http.StatusCreated {
			var task api.Task
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &task))
			require.NotEmpty(t, task.ID)
			return
		}
		require.GreaterOrEqual(t, rec.Code, 400, rec.Body.String())
		require.Less(t, rec.Code, 500, "body %q: %s", body, rec.Body.String())
		var e api.ErrorBody
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e))
		require.NotEmpty(t, e.Error.Code)
		require.NotEmpty(t, e.Error.Message)
	})
}
