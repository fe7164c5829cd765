package a2a

import (
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/errandhq/errand/internal/live"
)

// Live output reaches a stream as artifact updates: each model call (or
// other call of a step that shows its text as it comes) is one artifact,
// "output-<step>-<call>". Its first piece has append false, the next ones
// append true, so a client that follows A2A's artifact chunks shows the
// text growing; a piece that does not continue what the client has (a
// client joining mid-call, one that fell behind) is the call's whole text
// so far, append false, replacing it. When the call's step is recorded an
// empty text part with append and lastChunk true closes the artifact. The
// task's result still comes as the "result" artifact once it completes.

// liveKey names a call of a step.
type liveKey struct{ step, call int }

// livePiece is one artifact update of a call's live output.
type livePiece struct {
	key  liveKey
	text string
	// append adds text to the artifact; false replaces the artifact.
	append    bool
	lastChunk bool
}

// liveArtifactID names the artifact of a call's live output.
func liveArtifactID(k liveKey) string { return fmt.Sprintf("output-%d-%d", k.step, k.call) }

// liveText is what a client was sent of a call's text.
type liveText struct {
	text  []byte
	runes int
}

// liveOutput follows what one stream sent of each call still open; its
// memory is bounded by live.MaxCallText per call, as the hub's is.
type liveOutput struct {
	calls map[liveKey]*liveText
}

func newLiveOutput() *liveOutput { return &liveOutput{calls: map[liveKey]*liveText{}} }

// delta turns a piece of live output into the update that brings the
// client to the call's text; false when there is nothing to send (a piece
// past a gap, which the hub repairs by sending the text so far).
func (o *liveOutput) delta(d live.Delta) (livePiece, bool) {
	k := liveKey{d.StepNo, d.CallIndex}
	c := o.calls[k]
	switch {
	case d.Offset < 0:
		return livePiece{}, false
	case d.Offset == 0:
		if c == nil && d.Text == "" {
			return livePiece{}, false
		}
		o.calls[k] = &liveText{text: []byte(d.Text), runes: utf8.RuneCountInString(d.Text)}
		return livePiece{key: k, text: d.Text}, true
	case c == nil || d.Offset > c.runes:
		return livePiece{}, false
	case d.Offset == c.runes:
		if d.Text == "" {
			return livePiece{}, false
		}
		c.text = append(c.text, d.Text...)
		c.runes += utf8.RuneCountInString(d.Text)
		return livePiece{key: k, text: d.Text, append: true}, true
	}
	// The piece rewrites the end of what was sent: send the call whole.
	c.text = append(c.text[:live.ByteOffset(c.text, d.Offset)], d.Text...)
	c.runes = utf8.RuneCount(c.text)
	return livePiece{key: k, text: string(c.text)}, true
}

// end closes the artifact of a call whose step was recorded.
func (o *liveOutput) end(k liveKey) (livePiece, bool) {
	if _, ok := o.calls[k]; !ok {
		return livePiece{}, false
	}
	delete(o.calls, k)
	return livePiece{key: k, append: true, lastChunk: true}, true
}

// endAll closes every open artifact, in step and call order: the task
// has settled.
func (o *liveOutput) endAll() []livePiece {
	keys := make([]liveKey, 0, len(o.calls))
	for k := range o.calls {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b liveKey) int {
		if a.step != b.step {
			return a.step - b.step
		}
		return a.call - b.call
	})
	out := make([]livePiece, 0, len(keys))
	for _, k := range keys {
		p, _ := o.end(k)
		out = append(out, p)
	}
	return out
}

// merge folds next into prev when both are pieces of the same open
// artifact, so that a burst of pieces goes out as one update.
func merge(prev *livePiece, next livePiece) bool {
	if prev.key != next.key || prev.lastChunk {
		return false
	}
	switch {
	case next.lastChunk:
		prev.text += next.text
		prev.lastChunk = true
	case next.append:
		prev.text += next.text
	default:
		*prev = next // a replacement: what came before it no longer counts
	}
	return true
}

// stepKey reads the step and call a task.step event recorded.
func stepKey(data json.RawMessage) (liveKey, bool) {
	var s struct {
		StepNo    *int `json:"step_no"`
		CallIndex int  `json:"call_index"`
	}
	if json.Unmarshal(data, &s) != nil || s.StepNo == nil {
		return liveKey{}, false
	}
	return liveKey{*s.StepNo, s.CallIndex}, true
}

// liveArtifact is the artifact update p makes.
func liveArtifact(p livePiece) artifact {
	md, _ := json.Marshal(map[string]any{"errand": map[string]any{
		"live_output": true, "step_no": p.key.step, "call_index": p.key.call,
	}})
	return artifact{
		id: liveArtifactID(p.key), name: fmt.Sprintf("step %d output", p.key.step),
		parts: []part{{text: p.text}}, metadata: md,
	}
}

// liveUpdate is p as a stream event of the dialect.
func liveUpdate(d dialect, taskID, contextID string, p livePiece) any {
	a := liveArtifact(p)
	if d == dialectV03 {
		return v03ArtifactUpdate{Kind: "artifact-update", TaskID: taskID, ContextID: contextID,
			Artifact: v03ArtifactOf(a), Append: p.append, LastChunk: p.lastChunk}
	}
	return v1StreamResponse{ArtifactUpdate: &v1ArtifactUpdate{TaskID: taskID, ContextID: contextID,
		Artifact: v1ArtifactOf(a), Append: p.append, LastChunk: p.lastChunk}}
}
