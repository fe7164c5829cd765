package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// reply is one line ServeStdio wrote.
type reply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// replyLines splits out into lines, each one JSON-RPC message.
func replyLines(t *testing.T, out []byte) []reply {
	t.Helper()
	var got []reply
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 4*MaxBodyBytes)
	for sc.Scan() {
		var r reply
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), "%s", sc.Bytes())
		require.Equal(t, "2.0", r.JSONRPC, "%s", sc.Bytes())
		got = append(got, r)
	}
	require.NoError(t, sc.Err())
	return got
}

// byID finds the reply whose id is id (raw JSON, "null" for none).
func byID(t *testing.T, replies []reply, id string) []reply {
	t.Helper()
	var out []reply
	for _, r := range replies {
		if string(r.ID) == id {
			out = append(out, r)
		}
	}
	return out
}

// serveLines runs ServeStdio over input until it ends at EOF and returns
// what it wrote.
func serveLines(t *testing.T, b Backend, input string) []reply {
	t.Helper()
	var out bytes.Buffer
	served := make(chan error, 1)
	go func() {
		served <- ServeStdio(t.Context(), b, &Config{Logger: testLogger(t)}, strings.NewReader(input), &out)
	}()
	select {
	case err := <-served:
		require.NoError(t, err)
	case <-time.After(within):
		t.Fatal("ServeStdio did not return at EOF")
	}
	return replyLines(t, out.Bytes())
}

const (
	initializeLine  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
	initializedLine = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	toolsListLine   = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
)

// A host that writes its requests and closes stdin at once still gets an
// answer to each: EOF waits for them.
func TestServeStdioAnswersEverythingBeforeEOF(t *testing.T) {
	t.Parallel()
	b := setup(t, "local")
	replies := serveLines(t, LocalBackend(b.client), initializeLine+"\n"+initializedLine+"\n"+toolsListLine+"\n")
	require.Len(t, replies, 2, "%+v", replies)
	init := byID(t, replies, "1")
	require.Len(t, init, 1)
	require.Nil(t, init[0].Error)
	require.Contains(t, string(init[0].Result), `"protocolVersion":"2025-11-25"`)
	list := byID(t, replies, "2")
	require.Len(t, list, 1)
	require.Nil(t, list[0].Error)
	require.Contains(t, string(list[0].Result), `"submit_task"`)
}

// A line that is not JSON, or not a JSON-RPC message, gets an error
// reply with a null id, and the session reads on.
func TestServeStdioAnswersMalformedLines(t *testing.T) {
	t.Parallel()
	b := setup(t, "local")
	tooLong := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"submit_task","arguments":{"goal":"` + strings.Repeat("x", 2*MaxBodyBytes) + `"}}}`
	input := strings.Join([]string{
		"garbage, not JSON",
		initializeLine,
		`{"jsonrpc":`,
		initializedLine,
		"\xff\xfe",
		`{"foo":1}`,
		`42`,
		``,
		`   `,
		`[]`,
		`{"jsonrpc":"1.0","id":7,"method":"ping"}`,
		tooLong,
		"{\"jsonrpc\":\"2.0\",\r\n",
		toolsListLine,
		`{"jsonrpc":"2.0","id":3,"method":"ping"}` + "\r",
		`{"jsonrpc":"2.0","id":4,"method":"ping"} {"jsonrpc":"2.0","id":5,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":6,"method":"ping"}`, // no newline at the end
	}, "\n")
	replies := serveLines(t, LocalBackend(b.client), input)

	nulls := byID(t, replies, "null")
	codes := make([]int, 0, len(nulls))
	for _, r := range nulls {
		require.NotNil(t, r.Error, "%+v", r)
		require.NotEmpty(t, r.Error.Message)
		codes = append(codes, r.Error.Code)
	}
	// garbage, {"jsonrpc":, \xff\xfe, {"jsonrpc":"2.0",\r and two values
	// on a line do not parse; {"foo":1}, 42, [], the line too long are
	// not requests.
	require.ElementsMatch(t, []int{-32700, -32700, -32700, -32700, -32700, -32600, -32600, -32600, -32600}, codes, "%+v", nulls)
	// A request with an id it is wrong about is answered under that id.
	seven := byID(t, replies, "7")
	require.Len(t, seven, 1)
	require.Equal(t, -32600, seven[0].Error.Code)

	for _, id := range []string{"1", "2", "3", "6"} {
		r := byID(t, replies, id)
		require.Len(t, r, 1, "id %s: %+v", id, replies)
		require.Nil(t, r[0].Error, "id %s", id)
	}
	require.Contains(t, string(byID(t, replies, "2")[0].Result), `"submit_task"`)
	require.Len(t, replies, len(nulls)+5)
}

// A request id still being answered is refused when it comes again: the
// SDK would drop the second silently.
func TestServeStdioRefusesAnIDInUse(t *testing.T) {
	t.Parallel()
	b := setup(t, "local")
	task := b.submit(map[string]any{"goal": "held", "agent": "gate"})
	b.awaitGate()

	serverIn, clientOut := io.Pipe()
	clientIn, serverOut := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- ServeStdio(t.Context(), LocalBackend(b.client), &Config{Logger: testLogger(t)}, serverIn, serverOut)
		serverOut.Close()
	}()
	lines := make(chan reply, 10)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(clientIn)
		for sc.Scan() {
			var r reply
			if json.Unmarshal(sc.Bytes(), &r) == nil {
				lines <- r
			}
		}
	}()
	next := func() reply {
		t.Helper()
		select {
		case r, ok := <-lines:
			require.True(t, ok, "stdout closed")
			return r
		case <-time.After(within):
			t.Fatal("no reply")
		}
		return reply{}
	}
	write := func(line string) {
		t.Helper()
		_, err := io.WriteString(clientOut, line+"\n")
		require.NoError(t, err)
	}
	write(initializeLine)
	require.Equal(t, "1", string(next().ID))
	write(initializedLine)
	wait := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"wait_for_task","arguments":{"task_id":"` + task.ID + `","timeout_seconds":300}}}`
	write(wait)
	write(wait)
	r := next()
	require.Equal(t, "null", string(r.ID))
	require.Equal(t, -32600, r.Error.Code)
	require.Contains(t, r.Error.Message, "5")

	require.NoError(t, clientOut.Close()) // EOF waits for the wait
	close(b.gateRelease)
	r = next()
	require.Equal(t, "5", string(r.ID))
	require.Contains(t, string(r.Result), `"completed"`)
	select {
	case err := <-served:
		require.NoError(t, err)
	case <-time.After(within):
		t.Fatal("ServeStdio did not return at EOF")
	}
}
