package mcpclient

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// FuzzResultJSON feeds tool results as a server could send them: whatever
// the server says, the agent gets valid JSON within the limit, or a tool
// error, and nothing panics.
func FuzzResultJSON(f *testing.F) {
	for _, seed := range []string{
		`{"content":[{"type":"text","text":"Echo: hi"}]}`,
		`{"content":[{"type":"text","text":"{\"a\":1}"}],"structuredContent":{"a":1}}`,
		`{"content":[{"type":"text","text":"x"}],"structuredContent":[1,2,{"b":null}]}`,
		`{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"},{"type":"resource_link","uri":"file:///a","name":"a"}]}`,
		`{"content":[{"type":"resource","resource":{"uri":"file:///a","text":"\u2028<&>"}}],"isError":true}`,
		`{"content":[{"type":"audio","data":"","mimeType":""}],"structuredContent":"\ud800"}`,
		`{"content":[],"structuredContent":1e400}`,
	} {
		f.Add([]byte(seed), 200)
	}
	f.Fuzz(func(t *testing.T, data []byte, limit int) {
		var res mcp.CallToolResult
		if json.Unmarshal(data, &res) != nil {
			return
		}
		limit = 100 + abs(limit)%5000
		out, err := resultJSON("s", "t", &res, limit)
		if err != nil {
			var te *ToolError
			require.True(t, errors.As(err, &te), "%v", err)
			require.Equal(t, res.IsError, true)
			return
		}
		require.True(t, json.Valid(out), "%s", out)
		require.LessOrEqual(t, len(out), limit)
	})
}

// FuzzInputSchema: whatever schema a server lists, models get a JSON
// object of type object.
func FuzzInputSchema(f *testing.F) {
	for _, seed := range []string{`{"type":"object","properties":{}}`, `{}`, `[]`, `"x"`, `{"type":["object","null"]}`, `null`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if json.Unmarshal(data, &v) != nil {
			return
		}
		var got map[string]any
		require.NoError(t, json.Unmarshal(inputSchema(v), &got))
		require.Equal(t, "object", got["type"])
	})
}

func abs(n int) int {
	if n < 0 {
		if n == -n {
			return 0
		}
		return -n
	}
	return n
}
