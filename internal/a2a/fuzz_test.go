package a2a

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
)

// fuzzServer is a Server over a store with agents registered but no
// engine: tasks stay queued, and waits end at once.
func fuzzServer(t testing.TB) *Server {
	t.Helper()
	noop := errand.AgentFunc(func(context.Context, *errand.TaskRun) (errand.Result, error) { return errand.Result{}, nil })
	c, err := errand.Open(context.Background(), filepath.Join(t.TempDir(), "errand.db"),
		&errand.Config{Agents: map[string]errand.Agent{"default": noop, "ask": noop}})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	task, err := c.Submit(context.Background(), &errand.SubmitParams{Goal: "seeded", SessionID: "ctx-1"})
	require.NoError(t, err)
	_, err = c.PutPushConfig(context.Background(), &errand.PushConfig{TaskID: task.ID, ID: "p", URL: "https://x.example", ProtocolVersion: "1.0"})
	require.NoError(t, err)
	s, err := New(Config{
		Client: c, MaxBlock: time.Millisecond, CancelWait: time.Millisecond, AllowPrivate: true,
		// No logger: an internal error is -32603, which the checks refuse.
	})
	require.NoError(t, err)
	fuzzTaskID = task.ID
	return s
}

// fuzzTaskID is a task the fuzz server has; seeds name it.
var fuzzTaskID string

var knownCodes = map[int]bool{
	CodeParseError: true, CodeInvalidRequest: true, CodeMethodNotFound: true, CodeInvalidParams: true,
	CodeTaskNotFound: true, CodeTaskNotCancelable: true, CodeUnsupportedOperation: true,
	CodeContentTypeNotSupported: true, CodeVersionNotSupported: true,
}

// FuzzRPC sends any body to the JSON-RPC endpoint: nothing may panic or
// answer 500, every answer is a JSON-RPC answer (or a stream of them) and
// every error has a known code.
func FuzzRPC(f *testing.F) {
	s := fuzzServer(f)
	id := fuzzTaskID
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"},{"data":{"a":1}}],"metadata":{"agent":"ask"}},"configuration":{"returnImmediately":true,"historyLength":2}}}`,
		`{"jsonrpc":"2.0","id":"x","method":"message/send","params":{"message":{"kind":"message","messageId":"m3","role":"user","parts":[{"kind":"text","text":"hi"}],"taskId":"` + id + `"},"configuration":{"blocking":false,"pushNotificationConfig":{"url":"https://x.example"}}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"SendStreamingMessage","params":{"message":{"messageId":"s","role":"ROLE_USER","parts":[{"text":"go"}],"contextId":"ctx-1"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"GetTask","params":{"id":"` + id + `","historyLength":0}}`,
		`{"jsonrpc":"2.0","id":4,"method":"ListTasks","params":{"contextId":"ctx-1","status":"TASK_STATE_SUBMITTED","pageSize":1,"statusTimestampAfter":"2026-01-01T00:00:00Z"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"CancelTask","params":{"id":"` + id + `"}}`,
		`{"jsonrpc":"2.0","id":6,"method":"SubscribeToTask","params":{"id":"` + id + `"}}`,
		`{"jsonrpc":"2.0","id":7,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"` + id + `","url":"https://h.example/x","token":"t","authentication":{"scheme":"Bearer","credentials":"c"}}}`,
		`{"jsonrpc":"2.0","id":8,"method":"GetTaskPushNotificationConfig","params":{"taskId":"` + id + `","id":"p"}}`,
		`{"jsonrpc":"2.0","id":9,"method":"ListTaskPushNotificationConfigs","params":{"taskId":"` + id + `","pageSize":1,"pageToken":"a"}}`,
		`{"jsonrpc":"2.0","id":10,"method":"DeleteTaskPushNotificationConfig","params":{"taskId":"` + id + `","id":"p"}}`,
		`{"jsonrpc":"2.0","id":11,"method":"tasks/pushNotificationConfig/get","params":{"id":"` + id + `"}}`,
		`{"jsonrpc":"2.0","id":12,"method":"tasks/pushNotificationConfig/set","params":{"taskId":"` + id + `","pushNotificationConfig":{"url":"https://h.example","authentication":{"schemes":["Basic"]}}}}`,
		`{"jsonrpc":"2.0","id":13,"method":"tasks/resubscribe","params":{"id":"tsk_x"}}`,
		`{"jsonrpc":"2.0","id":14,"method":"message/stream","params":{"message":{"kind":"message","messageId":"m4","role":"user","parts":[{"kind":"data","data":{"x":[1,2]}},{"kind":"text","text":"y"}]}}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]`,
		`{"jsonrpc":"2.0","id":1e400,"method":"GetTask","params":null}`,
		`{"jsonrpc":"2.0","id":-1,"method":"ListTasks","params":{"status":7,"pageToken":"\u0000"}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"GetTask\",\"params\":{\"id\":\"\xff\"}}",
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":1,"parts":[{"text":"` + strings.Repeat("x", 70000) + `"}]}}}`,
		``, `null`, `{}`, `"x"`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, "POST", "/a2a", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		require.NotEqual(t, http.StatusInternalServerError, rec.Code, rec.Body.String())
		switch ct := rec.Header().Get("Content-Type"); ct {
		case "application/json":
			checkAnswer(t, rec.Body.Bytes())
		case "text/event-stream":
			sc := bufio.NewScanner(rec.Body)
			sc.Buffer(nil, 4<<20)
			for sc.Scan() {
				if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
					checkAnswer(t, []byte(data))
				}
			}
		default:
			t.Fatalf("answer of type %q: %s", ct, rec.Body.String())
		}
	})
}

func checkAnswer(t *testing.T, b []byte) {
	t.Helper()
	var a rpcAnswer
	require.NoError(t, json.Unmarshal(b, &a), string(b))
	require.Equal(t, "2.0", a.JSONRPC)
	require.NotEmpty(t, a.ID)
	require.True(t, (a.Error == nil) != (a.Result == nil), string(b))
	if a.Error != nil {
		require.True(t, knownCodes[a.Error.Code], "unknown code %d: %s", a.Error.Code, a.Error.Message)
		require.NotEmpty(t, a.Error.Message)
	}
}

// FuzzCard asks for the card with any Host, version and proxy header.
func FuzzCard(f *testing.F) {
	s := fuzzServer(f)
	f.Add("errand.example.com:8080", "1.0", "https")
	f.Add("[::1]:80", "", "http, https")
	f.Add("bad host", "0.3.1", "gopher")
	f.Add("a@b", "x.y", "")
	f.Fuzz(func(t *testing.T, host, version, proto string) {
		req := httptest.NewRequest("GET", CardPath, nil)
		req.Host = host
		req.Header["A2A-Version"] = []string{version}
		req.Header["X-Forwarded-Proto"] = []string{proto}
		rec := httptest.NewRecorder()
		s.Cards().ServeHTTP(rec, req)
		require.Contains(t, []int{http.StatusOK, http.StatusBadRequest}, rec.Code)
		var v map[string]any
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &v), rec.Body.String())
	})
}

// paramTypes are the params of every method, either version.
var paramTypes = []func() any{
	func() any { return &v1SendParams{} }, func() any { return &v03SendParams{} },
	func() any { return &v1TaskParams{} }, func() any { return &v03TaskQueryParams{} },
	func() any { return &v1ListParams{} }, func() any { return &v1CancelParams{} },
	func() any { return &v03TaskIDParams{} }, func() any { return &v1SubscribeParams{} },
	func() any { return &v1PushConfig{} }, func() any { return &v03TaskPushConfig{} },
	func() any { return &v1PushTarget{} }, func() any { return &v03PushTarget{} },
	func() any { return &v1PushListParams{} }, func() any { return &v1CardParams{} }, func() any { return &v03CardParams{} },
}

// FuzzParams sends any params object to every method: the answer is a
// JSON-RPC answer with a known code; a params object refused for a field
// it should not have changed nothing (the journal did not move); and
// what decodeParams lets through, encoding/json would not call unknown.
func FuzzParams(f *testing.F) {
	s := fuzzServer(f)
	names := slices.Sorted(maps.Keys(methods))
	id := fuzzTaskID
	for _, seed := range []struct{ method, params string }{
		{"SendMessage", `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]},"configuration":{"pushNotificationConfig":{"url":"https://x.example"}}}`},
		{"SendMessage", `{"message":{"messageId":"m2","role":"ROLE_USER","parts":[{"text":"hi","kind":"text"}]},"configuration":{"returnImmediately":true,"taskPushNotificationConfig":{"url":"https://x.example"}}}`},
		{"SendMessage", `{"message":{"messageId":"m3","role":"ROLE_USER","parts":[{"text":"hi"}]},"Configuration":{"ReturnImmediately":true}}`},
		{"message/send", `{"message":{"kind":"message","messageId":"m4","role":"user","parts":[{"kind":"text","text":"hi"}]},"configuration":{"blocking":false,"pushNotificationConfig":{"url":"https://x.example"}}}`},
		{"message/send", `{"message":{"kind":"message","messageId":"m5","role":"user","parts":[{"kind":"text","text":"hi"}]},"configuration":{"taskPushNotificationConfig":{"url":"https://x.example"}}}`},
		{"GetTask", `{"id":"` + id + `","historyLength":1,"tenant":""}`},
		{"tasks/get", `{"id":"` + id + `","metadata":{"x":1}}`},
		{"CancelTask", `{"id":"` + id + `","metadata":{},"extra":1}`},
		{"tasks/cancel", `{"id":"` + id + `","tenant":""}`},
		{"CreateTaskPushNotificationConfig", `{"taskId":"` + id + `","url":"https://h.example","authentication":{"scheme":"Bearer","schemes":["Basic"]}}`},
		{"tasks/pushNotificationConfig/set", `{"taskId":"` + id + `","pushNotificationConfig":{"url":"https://h.example"},"url":"https://h.example"}`},
		{"tasks/pushNotificationConfig/delete", `{"id":"` + id + `","pushNotificationConfigId":"p"}`},
		{"DeleteTaskPushNotificationConfig", `{"taskId":"` + id + `","id":"p","pushNotificationConfigId":"p"}`},
		{"ListTasks", `{"contextId":"ctx-1","status":"TASK_STATE_SUBMITTED","pageSize":1,"x":[{"y":1}]}`},
		{"GetExtendedAgentCard", `{"tenant":"t"}`},
		{"agent/getAuthenticatedExtendedCard", `{"metadata":{}}`},
	} {
		f.Add(uint8(slices.Index(names, seed.method)), []byte(seed.params))
	}
	f.Fuzz(func(t *testing.T, m uint8, params []byte) {
		if !json.Valid(params) {
			return // FuzzRPC sends bodies that do not parse
		}
		for _, newParams := range paramTypes {
			v := newParams()
			_, _, _, found := unknownField(params, reflect.TypeOf(v), "")
			dec := json.NewDecoder(bytes.NewReader(params))
			dec.DisallowUnknownFields()
			if err := dec.Decode(v); err != nil && !found {
				require.NotContains(t, err.Error(), "unknown field", "%T let %s through", v, params)
			}
		}
		name := names[int(m)%len(names)]
		body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": name, "params": json.RawMessage(params)})
		require.NoError(t, err)
		before, err := s.client.LastEventID(context.Background())
		require.NoError(t, err)
		// A stream of a task that does not end (no engine runs here) ends
		// with the request; any other answer comes at once.
		timeout := 10 * time.Second
		if op := methods[name].op; op == opStream || op == opSubscribe {
			timeout = 200 * time.Millisecond
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, "POST", "/a2a", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		require.NotEqual(t, http.StatusInternalServerError, rec.Code, rec.Body.String())
		if rec.Header().Get("Content-Type") != "application/json" || ctx.Err() != nil {
			return // a stream (FuzzRPC checks its events), or cut short
		}
		checkAnswer(t, rec.Body.Bytes())
		var a rpcAnswer
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &a))
		if a.Error != nil && a.Error.Code == CodeInvalidParams && strings.Contains(a.Error.Message, "unknown field") {
			after, err := s.client.LastEventID(context.Background())
			require.NoError(t, err)
			require.Equal(t, before, after, "%s(%s) was refused but wrote", name, params)
		}
	})
}
