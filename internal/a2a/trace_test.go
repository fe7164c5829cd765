package a2a

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/telemetry"
	"github.com/errandhq/errand/internal/telemetry/telemetrytest"
	"github.com/errandhq/errand/internal/webhook"
)

// traced is a fixture whose errand exports its traces through the real
// OTLP exporter to a receiver in the test process.
type traced struct {
	*fixture
	receiver *telemetrytest.Receiver
	provider *telemetry.Provider
}

func newTraced(t *testing.T, opts ...fixtureOption) *traced {
	t.Helper()
	rcv := telemetrytest.NewReceiver(t)
	tp, err := telemetry.New(context.Background(), &telemetry.Config{Endpoint: rcv.URL(), ServiceName: "errand-a2a-test"})
	require.NoError(t, err)
	// Registered before the fixture's cleanup, so run after it: the
	// engine has stopped when the provider shuts down.
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	return &traced{fixture: newTracedFixture(t, tp.TracerProvider(), opts...), receiver: rcv, provider: tp}
}

// onlyTask is the one task the fixture's errand holds, once completed.
func (f *traced) onlyTask() *errand.Task {
	f.t.Helper()
	list, err := f.client.List(f.t.Context(), &errand.ListParams{})
	require.NoError(f.t, err)
	require.Len(f.t, list.Tasks, 1)
	return f.waitStatus(list.Tasks[0].ID, errand.StatusCompleted)
}

// attempt is the exported task.attempt span of the task.
func (f *traced) attempt(taskID string) telemetrytest.Span {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(f.t, f.provider.ForceFlush(ctx))
	for _, s := range f.receiver.Spans() {
		if s.Name == telemetry.SpanAttempt && s.Attrs[telemetry.AttrTaskID] == taskID {
			return s
		}
	}
	require.FailNow(f.t, "no attempt span", "task %s", taskID)
	return telemetrytest.Span{}
}

func withTraces(c *Config) { c.Traces = true }

// A traceparent header on a message that submits a task, by any of the
// send methods, makes the task's run a child of the caller's span, as on
// POST /api/tasks.
func TestSubmitTraceparentParentsTheRun(t *testing.T) {
	t.Parallel()
	const (
		callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		callerSpan  = "00f067aa0ba902b7"
		caller      = "00-" + callerTrace + "-" + callerSpan + "-01"
	)
	for _, tt := range []struct {
		method string
		msg    map[string]any
		stream bool
	}{
		{"SendMessage", userMessage("m-v1", "Traced v1"), false},
		{"message/send", userMessageV03("m-v03", "Traced v0.3"), false},
		{"SendStreamingMessage", userMessage("m-v1-stream", "Traced stream"), true},
		{"message/stream", userMessageV03("m-v03-stream", "Traced v0.3 stream"), true},
	} {
		t.Run(tt.method, func(t *testing.T) {
			t.Parallel()
			f := newTraced(t, withTraces)
			headers := []string{"Traceparent", caller, "Tracestate", "vendor=1"}
			if tt.stream {
				// Read to the end: the stream ends when the task does.
				res, body := f.post(`{"jsonrpc":"2.0","id":1,"method":"`+tt.method+`","params":{"message":`+mustJSON(t, tt.msg)+`}}`,
					append(headers, "Accept", "text/event-stream")...)
				require.Equal(t, http.StatusOK, res.StatusCode, string(body))
				require.Equal(t, "text/event-stream", res.Header.Get("Content-Type"), string(body))
			} else {
				f.ok(tt.method, map[string]any{"message": tt.msg}, nil, headers...)
			}
			task := f.onlyTask()
			attempt := f.attempt(task.ID)
			require.Equal(t, callerTrace, attempt.TraceID, "the caller's trace")
			require.Equal(t, callerSpan, attempt.ParentSpanID, "under the caller's span")
			require.Contains(t, string(task.Metadata), `"a2a":`, "the message's own metadata is kept")
		})
	}
}

// A traceparent that is not one is ignored, as the Trace Context
// recommendation asks: the message is served and its run is traced in a
// trace of its own.
func TestSubmitMalformedTraceparentIgnored(t *testing.T) {
	t.Parallel()
	for name, header := range map[string]string{
		"not hex":        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
		"zero span id":   "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"version ff":     "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"garbage":        "{not a traceparent}",
		"too long for 0": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newTraced(t, withTraces)
			f.ok("SendMessage", map[string]any{"message": userMessage("m-bad", "Bad header")}, nil, "Traceparent", header)
			task := f.onlyTask()
			require.NotContains(t, string(task.Metadata), telemetry.MetadataKey)
			attempt := f.attempt(task.ID)
			require.Equal(t, telemetry.RunTraceID(task.RunID).String(), attempt.TraceID, "the run's own trace")
			require.Empty(t, attempt.ParentSpanID)
		})
	}
}

// Without Config.Traces (traces off in the daemon) the header is not
// kept: the task's metadata is the message's alone.
func TestSubmitTraceparentIgnoredWithoutTraces(t *testing.T) {
	t.Parallel()
	f := newTraced(t)
	f.ok("SendMessage", map[string]any{"message": userMessage("m-off", "Not kept")}, nil,
		"Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	task := f.onlyTask()
	require.NotContains(t, string(task.Metadata), telemetry.MetadataKey)
	require.Empty(t, f.attempt(task.ID).ParentSpanID)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// FuzzSubmitTraceparent sends a message with any traceparent header: the
// message is always served, and its task keeps the header (normalised)
// exactly when it is a valid traceparent. The parsing is the one POST
// /api/tasks uses (telemetry.ParseTraceparent, fuzzed by FuzzTraceparent).
func FuzzSubmitTraceparent(f *testing.F) {
	noop := errand.AgentFunc(func(context.Context, *errand.TaskRun) (errand.Result, error) { return errand.Result{}, nil })
	c, err := errand.Open(context.Background(), filepath.Join(f.TempDir(), "errand.db"),
		&errand.Config{Agents: map[string]errand.Agent{"default": noop}})
	require.NoError(f, err)
	f.Cleanup(func() { c.Close() })
	s, err := New(Config{Client: c, MaxBlock: time.Millisecond, Traces: true})
	require.NoError(f, err)
	for _, seed := range []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03",
		"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"", "\x00", `"},"x":{"`, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\"",
	} {
		f.Add(seed)
	}
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, header string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		id := fmt.Sprintf("fuzz-%d", n.Add(1))
		body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"` + id +
			`","role":"ROLE_USER","parts":[{"text":"hi"}]},"configuration":{"returnImmediately":true}}}`
		req := httptest.NewRequestWithContext(ctx, "POST", "/a2a", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header["Traceparent"] = []string{header}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var a struct {
			Result *struct {
				Task struct {
					ID string `json:"id"`
				} `json:"task"`
			} `json:"result"`
			Error any `json:"error"`
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &a), rec.Body.String())
		require.NotNil(t, a.Result, "a traceparent never fails a send: %s", rec.Body.String())
		task, err := c.Get(ctx, a.Result.Task.ID)
		require.NoError(t, err)
		var meta map[string]any
		require.NoError(t, json.Unmarshal(task.Metadata, &meta))
		sc, valid := telemetry.ParseTraceparent(header)
		if valid {
			require.Equal(t, telemetry.FormatTraceparent(sc), meta[telemetry.MetadataKey])
		} else {
			require.NotContains(t, meta, telemetry.MetadataKey)
		}
		require.Contains(t, meta, metadataKey, "the message's own metadata is kept")
	})
}

// A push tells of a task in the trace of the task's run: each attempt is
// an "a2a push" span there, and the push's traceparent names it. The
// client's own headers are still sent.
func TestPushCarriesTheRunTrace(t *testing.T) {
	t.Parallel()
	f := newTraced(t, withTraces)
	rc := newPushReceiver(t)
	pushed := make(chan error, 100)
	f.startPushesWith(t, &webhook.PushConfig{
		TracerProvider: f.provider.TracerProvider(),
		OnAttemptFunc:  func(_ string, _ int64, err error) { pushed <- err },
	})
	task := f.send(userMessage("pn-traced", "fence"), map[string]any{"returnImmediately": true, "taskPushNotificationConfig": map[string]any{
		"url": rc.srv.URL + "/hook?secret=s", "token": "tok-1",
	}})
	var last receivedPush
	for {
		last = rc.next(t)
		select {
		case err := <-pushed:
			require.NoError(t, err)
		case <-time.After(waitTimeout):
			require.FailNow(t, "the push was not reported")
		}
		var r v1StreamResponse
		require.NoError(t, json.Unmarshal(last.body, &r), string(last.body))
		if r.StatusUpdate != nil && r.StatusUpdate.Status.State == "TASK_STATE_COMPLETED" {
			break
		}
	}
	require.Equal(t, "tok-1", last.header.Get(NotificationTokenHeader))
	done, err := f.client.Get(t.Context(), task.ID)
	require.NoError(t, err)
	sc, ok := telemetry.ParseTraceparent(last.header.Get(telemetry.HeaderTraceparent))
	require.True(t, ok, "the push has a traceparent: %v", last.header)
	require.Equal(t, telemetry.RunTraceID(done.RunID), sc.TraceID(), "the task's run trace")

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	require.NoError(t, f.provider.ForceFlush(ctx))
	var span *telemetrytest.Span
	spans := f.receiver.Spans()
	for i, s := range spans {
		if s.SpanID == sc.SpanID().String() {
			span = &spans[i]
		}
	}
	require.NotNil(t, span, "the push's span was exported")
	require.Equal(t, "a2a push", span.Name)
	require.Equal(t, task.ID, span.Attrs[telemetry.AttrTaskID])
	require.Equal(t, rc.srv.URL+"/hook", span.Attrs["url.full"], "no query: the client's URL may hide a secret there")
	require.Empty(t, span.ParentSpanID, "beside the task's attempts, at the root of the run's trace")
}
