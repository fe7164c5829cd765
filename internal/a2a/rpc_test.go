package a2a

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMalformedRequests(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for name, tc := range map[string]struct {
		body   string
		header []string
		status int
		code   int
		id     string
		says   string
	}{
		"not JSON":          {`{"jsonrpc":`, nil, 200, CodeParseError, "null", "not valid JSON"},
		"empty":             {``, nil, 200, CodeParseError, "null", "not valid JSON"},
		"two values":        {`{"jsonrpc":"2.0","id":1,"method":"GetTask"} {}`, nil, 200, CodeParseError, "null", "more than one"},
		"bad UTF-8":         {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"GetTask\",\"params\":{\"id\":\"\xff\"}}", nil, 200, CodeParseError, "null", "UTF-8"},
		"batch":             {`[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]`, nil, 200, CodeInvalidRequest, "null", "batch"},
		"a number":          {`42`, nil, 200, CodeInvalidRequest, "null", "JSON object"},
		"no jsonrpc":        {`{"id":1,"method":"GetTask"}`, nil, 200, CodeInvalidRequest, "1", `"jsonrpc"`},
		"old jsonrpc":       {`{"jsonrpc":"1.0","id":"a","method":"GetTask"}`, nil, 200, CodeInvalidRequest, `"a"`, `"jsonrpc"`},
		"jsonrpc number":    {`{"jsonrpc":2,"id":1,"method":"GetTask"}`, nil, 200, CodeInvalidRequest, "null", "JSON-RPC request"},
		"no method":         {`{"jsonrpc":"2.0","id":1}`, nil, 200, CodeInvalidRequest, "1", `"method"`},
		"notification":      {`{"jsonrpc":"2.0","method":"GetTask","params":{"id":"x"}}`, nil, 200, CodeInvalidRequest, "null", "notification"},
		"id object":         {`{"jsonrpc":"2.0","id":{},"method":"GetTask"}`, nil, 200, CodeInvalidRequest, "null", `"id"`},
		"id too long":       {`{"jsonrpc":"2.0","id":"` + strings.Repeat("i", 300) + `","method":"GetTask"}`, nil, 200, CodeInvalidRequest, "null", "longer"},
		"unknown method":    {`{"jsonrpc":"2.0","id":1,"method":"tasks/list"}`, nil, 200, CodeMethodNotFound, "1", "tasks/list"},
		"params list":       {`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":[1]}`, nil, 200, CodeInvalidParams, "1", "params"},
		"newer version":     {`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`, []string{"A2A-Version", "2.0"}, 200, CodeVersionNotSupported, "1", "2.0"},
		"older version":     {`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}`, []string{"A2A-Version", "0.2"}, 200, CodeVersionNotSupported, "1", "0.2"},
		"garbage version":   {`{"jsonrpc":"2.0","id":1,"method":"GetTask"}`, []string{"X-A2A-Protocol-Version", "latest"}, 200, CodeVersionNotSupported, "1", "latest"},
		"text content type": {`{"jsonrpc":"2.0","id":1,"method":"GetTask"}`, []string{"Content-Type", "text/plain"}, 415, CodeInvalidRequest, "null", "Content-Type"},
		"too large":         {`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"x":"` + strings.Repeat("a", DefaultMaxBodyBytes) + `"}}`, nil, 413, CodeInvalidRequest, "null", "larger"},
	} {
		t.Run(name, func(t *testing.T) {
			res, b := f.post(tc.body, tc.header...)
			require.Equal(t, tc.status, res.StatusCode, string(b))
			var a rpcAnswer
			require.NoError(t, json.Unmarshal(b, &a), string(b))
			require.Equal(t, "2.0", a.JSONRPC)
			require.JSONEq(t, tc.id, string(a.ID))
			require.Nil(t, a.Result)
			require.NotNil(t, a.Error)
			require.Equal(t, tc.code, a.Error.Code, a.Error.Message)
			require.Contains(t, a.Error.Message, tc.says)
		})
	}

	// Versions spoken are accepted, patch numbers ignored.
	for _, v := range []string{"1.0", "0.3", "1.0.2", "0.3.0", ""} {
		a := f.call("GetTask", map[string]any{"id": "tsk_nope"}, "A2A-Version", v)
		require.Equal(t, CodeTaskNotFound, a.Error.Code, "version %q", v)
	}
}

func TestOtherHTTPShapes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	res, err := http.Get(f.http.URL + "/a2a")
	require.NoError(t, err)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, res.StatusCode)
	require.Equal(t, "POST", res.Header.Get("Allow"))
	require.Contains(t, string(b), "POST")

	res, err = http.Post(f.http.URL+"/a2a/elsewhere", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusNotFound, res.StatusCode)

	// A trailing slash and the a2a+json media type are fine.
	res, err = http.Post(f.http.URL+"/a2a/", "application/a2a+json", strings.NewReader(`{"jsonrpc":"2.0","id":"x","method":"GetTask","params":{"id":"tsk_nope"}}`))
	require.NoError(t, err)
	var a rpcAnswer
	require.NoError(t, json.NewDecoder(res.Body).Decode(&a))
	res.Body.Close()
	require.Equal(t, CodeTaskNotFound, a.Error.Code)
	require.JSONEq(t, `"x"`, string(a.ID))

	e := f.fails(CodeUnsupportedOperation, "GetExtendedAgentCard", map[string]any{})
	require.Contains(t, e.Message, "extended card")
	f.fails(CodeUnsupportedOperation, "agent/getAuthenticatedExtendedCard", nil)
}

func getCard(t *testing.T, f *fixture, path string, header ...string) (*http.Response, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", f.http.URL+path, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var card map[string]any
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	if res.StatusCode == http.StatusOK {
		require.NoError(t, json.Unmarshal(b, &card), string(b))
	}
	return res, card
}

func TestCards(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	host := strings.TrimPrefix(f.http.URL, "http://")

	res, card := getCard(t, f, CardPath, "A2A-Version", "1.0")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "application/json", res.Header.Get("Content-Type"))
	require.Contains(t, res.Header.Get("Vary"), "A2A-Version")
	want := `{
		"name": "errand",
		"description": "` + f.server.cfg.Description + `",
		"version": "1.2.3",
		"supportedInterfaces": [
			{"url": "http://` + host + `/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
			{"url": "http://` + host + `/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}
		],
		"capabilities": {"streaming": true, "pushNotifications": true, "extendedAgentCard": false},
		"securitySchemes": {"bearer": {"httpAuthSecurityScheme": {"scheme": "bearer", "description": "` + securityDescription + `"}}},
		"securityRequirements": [{"schemes": {"bearer": {"list": []}}}],
		"defaultInputModes": ["text/plain", "application/json"],
		"defaultOutputModes": ["text/plain", "application/json"],
		"skills": [
			{"id": "default", "name": "default", "description": "echoes", "tags": []},
			{"id": "ask", "name": "ask", "description": "asks first", "tags": []}
		]
	}`
	b, _ := json.Marshal(card)
	require.JSONEq(t, want, string(b))

	// No version, or 0.3: the v0.3 card, which lists the v1.0 interfaces
	// too.
	for _, header := range [][]string{nil, {"A2A-Version", "0.3"}} {
		res, card = getCard(t, f, CardPath, header...)
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.Equal(t, "0.3.0", card["protocolVersion"])
		require.Equal(t, "http://"+host+"/a2a", card["url"])
		require.Equal(t, "JSONRPC", card["preferredTransport"])
		require.Equal(t, map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer", "description": securityDescription}}, card["securitySchemes"])
		require.Equal(t, []any{map[string]any{"bearer": []any{}}}, card["security"])
		require.Equal(t, map[string]any{"streaming": true, "pushNotifications": true, "stateTransitionHistory": false}, card["capabilities"])
		require.Len(t, card["supportedInterfaces"], 2)
		require.Len(t, card["skills"], 2)
	}

	// Behind a proxy: X-Forwarded-Proto and the Host the client used.
	_, card = getCard(t, f, CardPath, "A2A-Version", "1.0", "X-Forwarded-Proto", "https", "Host", "errand.example.com")
	require.Equal(t, "https://errand.example.com/a2a", card["supportedInterfaces"].([]any)[0].(map[string]any)["url"])
	_, card = getCard(t, f, CardPath, "X-Forwarded-Proto", "gopher")
	require.Equal(t, "http://"+host+"/a2a", card["url"], "an unknown scheme is ignored")

	res, _ = getCard(t, f, CardPath, "Host", "bad host")
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	res, _ = getCard(t, f, "/.well-known/agent.json")
	require.Equal(t, http.StatusNotFound, res.StatusCode)

	// A configured base URL wins.
	g := newFixture(t, func(c *Config) { c.BaseURL = "https://agents.example.com/errand/" })
	_, card = getCard(t, g, CardPath)
	require.Equal(t, "https://agents.example.com/errand/a2a", card["url"])

	_, err := New(Config{Client: f.client, BaseURL: "ftp://x"})
	require.Error(t, err)
	_, err = New(Config{})
	require.Error(t, err)
}
