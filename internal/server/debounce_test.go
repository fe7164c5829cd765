package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
)

// Submits with one debounce key collapse into the first task: every
// caller gets its id (201, then 200 marked Errand-Debounced), and it holds
// the last submit's content.
func TestDebounceSubmit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	first := f.submit(`{"goal":"first","debounce":{"key":"inbox","period":"1h"}}`)
	require.Equal(t, "inbox", first.DebounceKey)

	res, b := f.do("POST", "/api/tasks", `{"goal":"last","tags":["x"],"debounce":{"key":"inbox","period":"1h"}}`)
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
	require.Equal(t, "true", res.Header.Get("Errand-Debounced"))
	var got api.Task
	require.NoError(t, json.Unmarshal(b, &got))
	require.Equal(t, first.ID, got.ID)
	require.Equal(t, "last", got.Goal)
	require.Equal(t, []string{"x"}, got.Tags)

	// A retry of a submit whose content a later one replaced gets the task.
	keyed := f.submit(`{"goal":"a","idempotency_key":"i1","debounce":{"key":"keyed","period":"1h"}}`)
	res, b = f.do("POST", "/api/tasks", `{"goal":"b","debounce":{"key":"keyed","period":"1h"}}`)
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
	res, b = f.do("POST", "/api/tasks", `{"goal":"a","idempotency_key":"i1","debounce":{"key":"keyed","period":"1h"}}`)
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
	require.NoError(t, json.Unmarshal(b, &got))
	require.Equal(t, keyed.ID, got.ID)
	require.Equal(t, "b", got.Goal)

	other := f.submit(`{"goal":"other key","debounce":{"key":"other","period":"1h"}}`)
	require.NotEqual(t, first.ID, other.ID)

	for _, c := range []struct{ body, field string }{
		{`{"goal":"g","debounce":{"key":"","period":"5s"}}`, "debounce.key"},
		{`{"goal":"g","debounce":{"period":"5s"}}`, "debounce.key"},
		{`{"goal":"g","debounce":{"key":"` + strings.Repeat("k", 201) + `","period":"5s"}}`, "debounce.key"},
		{`{"goal":"g","debounce":{"key":"a\u0007b","period":"5s"}}`, "debounce.key"},
		{`{"goal":"g","debounce":{"key":"k","period":"5"}}`, "debounce.period"},
		{`{"goal":"g","debounce":{"key":"k"}}`, "debounce.period"},
		{`{"goal":"g","debounce":{"key":"k","period":"0s"}}`, "debounce.period"},
		{`{"goal":"g","debounce":{"key":"k","period":"-5s"}}`, "debounce.period"},
		{`{"goal":"g","debounce":{"key":"k","period":"25h"}}`, "debounce.period"},
		{`{"goal":"g","run_at":"2030-01-01T00:00:00Z","debounce":{"key":"k","period":"5s"}}`, "debounce"},
	} {
		res, b := f.do("POST", "/api/tasks", c.body)
		e := requireError(t, res, b, http.StatusBadRequest, "invalid")
		require.Equal(t, c.field, e.Field, c.body)
	}
	for _, body := range []string{
		`{"goal":"g","debounce":{"key":"k","period":"5s","extra":1}}`,
		`{"goal":"g","debounce":"k"}`,
		`{"goal":"g","debounce":{"key":1,"period":"5s"}}`,
	} {
		res, b := f.do("POST", "/api/tasks", body)
		require.Equal(t, http.StatusBadRequest, res.StatusCode, "%s: %s", body, b)
	}
}

// FuzzDebounceBody: whatever debounce key and period a client sends, POST
// /api/tasks answers without a 5xx, a refusal writes nothing, and the same
// request sent again is answered with the same task.
func FuzzDebounceBody(f *testing.F) {
	for _, seed := range [][2]string{
		{"k", "5s"}, {"", "5s"}, {"k", ""}, {"k", "0"}, {"k", "-1s"}, {"k", "24h0m1s"}, {"\xff", "1s"},
		{"a\tb", "1m"}, {strings.Repeat("k", 201), "1s"}, {"k", "1e9s"}, {"k", "9223372036s"},
	} {
		f.Add(seed[0], seed[1])
	}
	b := newFuzzBundle(f)
	f.Fuzz(func(t *testing.T, key, period string) {
		body, err := json.Marshal(map[string]any{"goal": "fuzz the debounce", "debounce": map[string]string{"key": key, "period": period}})
		require.NoError(t, err)
		before := b.dataVersion(t)
		first := b.serveFuzzWith(t, "POST", "/api/tasks", "", body, nil)
		require.Less(t, first.Code, 500, "%q / %q: %s", key, period, first.Body.String())
		if first.Code >= 400 {
			require.Equal(t, before, b.dataVersion(t), "a refused debounce changed the store")
			return
		}
		var made api.Task
		require.NoError(t, json.Unmarshal(first.Body.Bytes(), &made))
		var sent struct{ Debounce struct{ Key string } }
		require.NoError(t, json.Unmarshal(body, &sent)) // as JSON carries it: invalid UTF-8 replaced
		require.Equal(t, sent.Debounce.Key, made.DebounceKey)
		again := b.serveFuzzWith(t, "POST", "/api/tasks", "", body, nil)
		require.Equal(t, http.StatusOK, again.Code, again.Body.String())
		var collapsed api.Task
		require.NoError(t, json.Unmarshal(again.Body.Bytes(), &collapsed))
		require.Equal(t, made.ID, collapsed.ID)
	})
}
