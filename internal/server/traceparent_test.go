package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/telemetry"
)

// A traceparent header on POST /api/tasks is kept with the task when
// traces are on; off, or when the header is bad or repeated, the task is
// written as if there were none.
func TestSubmitKeepsTraceparent(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	post := func(f *fixture, headers ...string) map[string]any {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), "POST", f.http.URL+"/api/tasks",
			strings.NewReader(`{"goal":"g","metadata":{"team":"ops"}}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+testToken)
		for _, h := range headers {
			req.Header.Add("Traceparent", h)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		require.Equal(t, http.StatusCreated, res.StatusCode)
		var task struct {
			Metadata map[string]any `json:"metadata"`
		}
		require.NoError(t, json.NewDecoder(res.Body).Decode(&task))
		return task.Metadata
	}
	on := newFixtureConfig(t, nil, func(c *Config) { c.Traces = true })
	require.Equal(t, map[string]any{"team": "ops", telemetry.MetadataKey: tp}, post(on, tp))
	require.Equal(t, map[string]any{"team": "ops"}, post(on, "00-bad"), "a bad header is ignored")
	require.Equal(t, map[string]any{"team": "ops"}, post(on, tp, tp), "a repeated header is ignored")
	require.Equal(t, map[string]any{"team": "ops"}, post(on))

	off := newFixture(t, nil)
	require.Equal(t, map[string]any{"team": "ops"}, post(off, tp), "traces off: the header is ignored")
}

// The traceparent header of a WebSocket's upgrade request is kept with
// each task the connection submits, when traces are on.
func TestWebSocketSubmitKeepsTraceparent(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	f := newFixtureConfig(t, nil, func(c *Config) { c.Traces = true })
	ctx := t.Context()
	url := "ws" + strings.TrimPrefix(f.http.URL, "http") + "/api/ws?token=" + testToken
	conn, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Traceparent": {tp}}})
	require.NoError(t, err)
	defer conn.CloseNow()
	require.NoError(t, conn.Write(ctx, websocket.MessageText, []byte(`{"type":"req","id":1,"method":"submit_task","params":{"goal":"over ws"}}`)))
	for {
		_, b, err := conn.Read(ctx)
		require.NoError(t, err)
		var fr api.Frame
		require.NoError(t, json.Unmarshal(b, &fr), string(b))
		if fr.Type != "res" {
			continue
		}
		require.Nil(t, fr.Error)
		var submitted struct {
			Task struct {
				Metadata map[string]any `json:"metadata"`
			} `json:"task"`
		}
		require.NoError(t, json.Unmarshal(fr.Result, &submitted))
		require.Equal(t, map[string]any{telemetry.MetadataKey: tp}, submitted.Task.Metadata)
		return
	}
}
