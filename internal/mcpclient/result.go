package mcpclient

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ToolError is a tool's own report of failure (isError): what it said
// goes back to the model, which may try again differently.
type ToolError struct {
	Server, Tool string
	// Message is the tool's text content, joined.
	Message string
}

func (e *ToolError) Error() string { return e.Server + "." + e.Tool + ": " + e.Message }

// resultJSON turns a tool's result into the JSON the agent records and
// shows the model:
//   - text only: a JSON string, the text parts joined by newlines;
//   - structured content: that JSON, as is, when the text is empty or
//     only repeats it (as the spec asks servers to do); else an object
//     {"text": …, "structured_content": …};
//   - isError: a *ToolError with the text.
//
// Images, audio and resources the model cannot take in a tool result are
// described in the text instead. A result over limit bytes becomes a string
// cut to fit, saying so.
func resultJSON(server, tool string, res *mcp.CallToolResult, limit int) (json.RawMessage, error) {
	text := contentText(res.Content)
	if res.IsError {
		if text == "" {
			text = "the tool reported an error and said nothing more"
		}
		return nil, &ToolError{Server: server, Tool: tool, Message: cut(text, limit)}
	}
	var out json.RawMessage
	var err error
	if res.StructuredContent != nil {
		structured, merr := json.Marshal(res.StructuredContent)
		switch {
		case merr != nil:
			out, err = json.Marshal(text)
		case text == "" || sameJSON(text, structured):
			out = structured
		default:
			out, err = json.Marshal(map[string]json.RawMessage{"text": mustString(text), "structured_content": structured})
		}
	} else {
		out, err = json.Marshal(text)
	}
	if err != nil {
		return nil, fmt.Errorf("%s.%s: encode the result: %w", server, tool, err)
	}
	if len(out) > limit {
		out, err = json.Marshal(cut(string(out), limit))
		if err != nil {
			return nil, fmt.Errorf("%s.%s: encode the result: %w", server, tool, err)
		}
	}
	return out, nil
}

// contentText joins a result's content as text.
func contentText(content []mcp.Content) string {
	var parts []string
	for _, c := range content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image: %s, %d bytes, not shown]", c.MIMEType, len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio: %s, %d bytes, not shown]", c.MIMEType, len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link: %s %s]", c.Name, c.URI))
		case *mcp.EmbeddedResource:
			r := c.Resource
			switch {
			case r == nil:
			case r.Text != "":
				parts = append(parts, r.Text)
			default:
				parts = append(parts, fmt.Sprintf("[resource: %s, %s, %d bytes, not shown]", r.URI, r.MIMEType, len(r.Blob)))
			}
		case nil:
		default:
			parts = append(parts, "[content errand cannot show]")
		}
	}
	return strings.Join(parts, "\n")
}

// sameJSON reports whether text is a JSON encoding of the same value as
// structured.
func sameJSON(text string, structured []byte) bool {
	var a, b any
	if json.Unmarshal([]byte(text), &a) != nil || json.Unmarshal(structured, &b) != nil {
		return false
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

func mustString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// cut shortens s so that it, encoded as a JSON string, fits in limit
// bytes, cutting on a rune boundary and saying how much was left out.
func cut(s string, limit int) string {
	if enc, _ := json.Marshal(s); len(enc) <= limit {
		return s
	}
	note := fmt.Sprintf("… [cut: the result was %d bytes, errand keeps %d]", len(s), limit)
	budget := limit - 2 - jsonLen(note) // the quotes and the note
	keep := 0
	for i, r := range s {
		n := jsonRuneLen(r)
		if budget < n {
			break
		}
		budget -= n
		keep = i + utf8.RuneLen(r)
		if r == utf8.RuneError {
			keep = i + 1
		}
	}
	return strings.ToValidUTF8(s[:keep], "\uFFFD") + note
}

func jsonLen(s string) int {
	n := 0
	for _, r := range s {
		n += jsonRuneLen(r)
	}
	return n
}

// jsonRuneLen is how many bytes encoding/json writes for r in a string.
func jsonRuneLen(r rune) int {
	switch {
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t' || r == '\b' || r == '\f':
		return 2
	case r < 0x20 || r == '<' || r == '>' || r == '&' || r == 0x2028 || r == 0x2029 || r == utf8.RuneError:
		return 6
	}
	return utf8.RuneLen(r)
}
