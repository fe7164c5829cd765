package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
)

// The Idempotency-Key header is the same as the idempotency_key field: a
// client that retries POST /api/tasks with it gets its first task back
// (200), not a second one; header and field may both be given only if
// they agree.
func TestIdempotencyKeyHeader(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	post := func(body string, keys ...string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), "POST", f.http.URL+"/api/tasks", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+testToken)
		for _, k := range keys {
			req.Header.Add("Idempotency-Key", k)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res, b
	}
	taskOf := func(b []byte) api.Task {
		t.Helper()
		var task api.Task
		require.NoError(t, json.Unmarshal(b, &task), string(b))
		return task
	}

	res, b := post(`{"goal":"g"}`, "retry-1")
	require.Equal(t, http.StatusCreated, res.StatusCode, string(b))
	first := taskOf(b)

	res, b = post(`{"goal":"g"}`, "retry-1")
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
	require.Equal(t, first.ID, taskOf(b).ID)

	// The field and the header name the same key.
	res, b = post(`{"goal":"g","idempotency_key":"retry-1"}`)
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
	require.Equal(t, first.ID, taskOf(b).ID)
	res, b = post(`{"goal":"g","idempotency_key":"retry-1"}`, "retry-1")
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
	require.Equal(t, first.ID, taskOf(b).ID)

	// The key reused for something else is a conflict, as with the field.
	res, b = post(`{"goal":"other"}`, "retry-1")
	requireError(t, res, b, http.StatusConflict, "duplicate")

	for _, tt := range []struct {
		name string
		body string
		keys []string
	}{
		{"header and field differ", `{"goal":"g","idempotency_key":"a"}`, []string{"b"}},
		{"empty header", `{"goal":"g"}`, []string{" "}},
		{"two headers", `{"goal":"g"}`, []string{"a", "b"}},
	} {
		res, b := post(tt.body, tt.keys...)
		e := requireError(t, res, b, http.StatusBadRequest, "bad_request")
		require.Equal(t, "idempotency_key", e.Field, tt.name)
	}

	res, b = f.do("GET", "/api/tasks", "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	var list api.TaskList
	require.NoError(t, json.Unmarshal(b, &list))
	require.Len(t, list.Tasks, 1, "a retry made a second task")
}
