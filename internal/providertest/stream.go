package providertest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// writeStream sends reply as OpenAI does: a first chunk with the role, the
// text in pieces, each tool call's id and name and then its arguments in
// pieces, a chunk with the finish reason, the usage chunk (empty choices)
// when asked for, then [DONE]. With a Hold, it waits after the role chunk
// and reply.HoldAfter pieces of text.
func (s *Server) writeStream(w http.ResponseWriter, req *http.Request, id string, rec RecordedRequest, r Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)

	// A comment, as proxies send for keep-alive; clients must skip it.
	if _, err := io.WriteString(w, ": providertest\n\n"); err != nil {
		return
	}
	var nullUsage **wireUsage
	if rec.IncludeUsage {
		var none *wireUsage
		nullUsage = &none // every chunk says "usage": null, as OpenAI does
	}
	chunk := func(delta *wireDelta, finish *string) wireCompletion {
		return wireCompletion{
			ID: id, Object: "chat.completion.chunk", Created: created, Model: rec.Model,
			Choices: []wireChoice{{Delta: delta, FinishReason: finish}},
			Usage:   nullUsage,
		}
	}
	empty := ""
	chunks := []wireCompletion{chunk(&wireDelta{Role: "assistant", Content: &empty}, nil)}
	pieces := SplitText(r.Text)
	// The hold comes once this many chunks (the role's, then text) are out.
	holdAt := 1 + min(max(r.HoldAfter, 0), len(pieces))
	for _, piece := range pieces {
		chunks = append(chunks, chunk(&wireDelta{Content: &piece}, nil))
	}
	for i, c := range r.ToolCalls {
		head := wireToolCall{Index: &i, ID: c.ID, Type: "function"}
		head.Function.Name = c.Name
		chunks = append(chunks, chunk(&wireDelta{ToolCalls: []wireToolCall{head}}, nil))
		for _, piece := range splitRunes(arguments(c), argsPieceRunes) {
			part := wireToolCall{Index: &i}
			part.Function.Arguments = piece
			chunks = append(chunks, chunk(&wireDelta{ToolCalls: []wireToolCall{part}}, nil))
		}
	}
	chunks = append(chunks, chunk(&wireDelta{}, finishReason(r)))
	if rec.IncludeUsage && r.Usage != nil {
		chunks = append(chunks, wireCompletion{
			ID: id, Object: "chat.completion.chunk", Created: created, Model: rec.Model,
			Choices: []wireChoice{}, Usage: toWireUsage(r.Usage),
		})
	}
	for i, c := range chunks {
		if i == holdAt && !s.hold(req, r) {
			return
		}
		data, err := json.Marshal(c)
		if err != nil {
			panic(err) // our own types always encode
		}
		if r.Sent != nil && i >= 1 && i <= len(pieces) {
			r.Sent(i - 1)
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", data); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}
