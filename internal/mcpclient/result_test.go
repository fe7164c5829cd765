package mcpclient

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

func TestResultJSON(t *testing.T) {
	t.Parallel()
	text := func(s string) mcp.Content { return &mcp.TextContent{Text: s} }
	for _, tt := range []struct {
		name string
		res  mcp.CallToolResult
		want string
	}{
		{"Text", mcp.CallToolResult{Content: []mcp.Content{text("Echo: hi")}}, `"Echo: hi"`},
		{"TextsJoined", mcp.CallToolResult{Content: []mcp.Content{text("one"), text("two")}}, `"one\ntwo"`},
		{"Empty", mcp.CallToolResult{}, `""`},
		{"Structured", mcp.CallToolResult{StructuredContent: map[string]any{"sum": 5}}, `{"sum":5}`},
		{"StructuredRepeatedAsText", mcp.CallToolResult{
			Content: []mcp.Content{text(`{"sum": 5}`)}, StructuredContent: map[string]any{"sum": 5},
		}, `{"sum":5}`},
		{"StructuredAndOtherText", mcp.CallToolResult{
			Content: []mcp.Content{text("The sum is 5.")}, StructuredContent: map[string]any{"sum": 5},
		}, `{"text":"The sum is 5.","structured_content":{"sum":5}}`},
		{"StructuredScalar", mcp.CallToolResult{StructuredContent: 42}, `42`},
		{"Media", mcp.CallToolResult{Content: []mcp.Content{
			&mcp.ImageContent{MIMEType: "image/png", Data: []byte("12345")},
			&mcp.AudioContent{MIMEType: "audio/wav", Data: []byte("1")},
			&mcp.ResourceLink{Name: "report", URI: "file:///r.md"},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///a.txt", Text: "inline text"}},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///b.bin", MIMEType: "application/zip", Blob: []byte("zip")}},
		}}, `"[image: image/png, 5 bytes, not shown]\n[audio: audio/wav, 1 bytes, not shown]\n[resource link: report file:///r.md]\ninline text\n[resource: file:///b.bin, application/zip, 3 bytes, not shown]"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := resultJSON("s", "t", &tt.res, DefaultMaxResultBytes)
			require.NoError(t, err)
			require.JSONEq(t, tt.want, string(out))
		})
	}
}

func TestResultJSONErrors(t *testing.T) {
	t.Parallel()
	_, err := resultJSON("s", "t", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such file"}}}, 100)
	require.EqualError(t, err, "s.t: no such file")
	_, err = resultJSON("s", "t", &mcp.CallToolResult{IsError: true}, 100)
	require.EqualError(t, err, "s.t: the tool reported an error and said nothing more")
	_, err = resultJSON("s", "t", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("e", 1000)}}}, 100)
	require.LessOrEqual(t, len(err.Error()), 110, "a tool's error is bounded too")
}

func TestResultJSONCut(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		strings.Repeat("a", 5000),
		strings.Repeat("é<\"\n", 2000),
		strings.Repeat("\xff", 3000),
	} {
		out, err := resultJSON("s", "t", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}, 1000)
		require.NoError(t, err)
		require.LessOrEqual(t, len(out), 1000)
		require.Greater(t, len(out), 900, "what fits is kept")
		var got string
		require.NoError(t, json.Unmarshal(out, &got))
		require.Contains(t, got, "[cut: the result was ")
	}
	big := map[string]any{"items": strings.Split(strings.Repeat("x,", 2000), ",")}
	out, err := resultJSON("s", "t", &mcp.CallToolResult{StructuredContent: big}, 1000)
	require.NoError(t, err)
	require.LessOrEqual(t, len(out), 1000)
	var got string
	require.NoError(t, json.Unmarshal(out, &got), "cut structured content is text")
	require.True(t, strings.HasPrefix(got, `{"items":["x","x",`), got)
}

func TestInputSchema(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   any
		want string
	}{
		{map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}}, `{"type":"object","properties":{"a":{"type":"string"}}}`},
		{map[string]any{"properties": map[string]any{}}, `{"type":"object","properties":{}}`},
		{map[string]any{"type": "string"}, `{"type":"object"}`},
		{nil, `{"type":"object"}`},
		{[]any{1}, `{"type":"object"}`},
		{json.RawMessage(`{"type":"object","$defs":{}}`), `{"type":"object","$defs":{}}`},
	} {
		require.JSONEq(t, tt.want, string(inputSchema(tt.in)), "%v", tt.in)
	}
}
