package a2a

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/live"
)

// client keeps artifacts as an A2A client does: append adds to the
// artifact with the same id, anything else replaces it.
type artifactClient struct {
	text   map[string]string
	closed map[string]bool
}

func newArtifactClient() *artifactClient {
	return &artifactClient{text: map[string]string{}, closed: map[string]bool{}}
}

func (c *artifactClient) apply(t *testing.T, p livePiece) {
	t.Helper()
	id := liveArtifactID(p.key)
	if p.append {
		_, seen := c.text[id]
		require.True(t, seen, "an append to %s, which the client has not seen", id)
		require.False(t, c.closed[id], "an append to %s after its last chunk", id)
		c.text[id] += p.text
	} else {
		c.text[id] = p.text
		delete(c.closed, id)
	}
	if p.lastChunk {
		c.closed[id] = true
	}
}

func TestLiveOutputPieces(t *testing.T) {
	t.Parallel()
	o := newLiveOutput()
	c := newArtifactClient()
	k := liveKey{2, 0}
	send := func(offset int, text string) (livePiece, bool) {
		p, ok := o.delta(live.Delta{StepNo: 2, Offset: offset, Text: text})
		if ok {
			c.apply(t, p)
		}
		return p, ok
	}

	p, ok := send(0, "Héllo")
	require.True(t, ok)
	require.Equal(t, livePiece{key: k, text: "Héllo"}, p, "the first piece starts the artifact")
	p, ok = send(5, ", wörld")
	require.True(t, ok)
	require.Equal(t, livePiece{key: k, text: ", wörld", append: true}, p, "offsets count characters, not bytes")

	_, ok = send(40, "later")
	require.False(t, ok, "a piece past a gap waits for the text so far")
	_, ok = send(12, "")
	require.False(t, ok, "an empty piece says nothing")

	p, ok = send(7, "World!")
	require.True(t, ok)
	require.Equal(t, livePiece{key: k, text: "Héllo, World!"}, p, "a piece that rewrites the end is sent whole")

	p, ok = send(0, "Héllo, World! And")
	require.True(t, ok)
	require.False(t, p.append, "the text so far replaces the artifact")
	require.Equal(t, "Héllo, World! And", c.text["output-2-0"])

	p, ok = o.end(k)
	require.True(t, ok)
	c.apply(t, p)
	require.Equal(t, livePiece{key: k, append: true, lastChunk: true}, p)
	require.True(t, c.closed["output-2-0"])
	_, ok = o.end(k)
	require.False(t, ok, "a call is closed once")
	_, ok = o.end(liveKey{3, 0})
	require.False(t, ok, "a step that showed no text has no artifact to close")

	_, ok = o.delta(live.Delta{StepNo: 4, Offset: 3, Text: "mid"})
	require.False(t, ok, "a joiner starts from a call's text so far, at offset 0")
	_, ok = o.delta(live.Delta{StepNo: 4, Offset: 0})
	require.False(t, ok)
}

func TestLiveOutputEndAll(t *testing.T) {
	t.Parallel()
	o := newLiveOutput()
	for _, k := range []liveKey{{3, 1}, {1, 0}, {3, 0}} {
		_, ok := o.delta(live.Delta{StepNo: k.step, CallIndex: k.call, Text: "x"})
		require.True(t, ok)
	}
	var got []liveKey
	for _, p := range o.endAll() {
		require.True(t, p.append && p.lastChunk)
		got = append(got, p.key)
	}
	require.Equal(t, []liveKey{{1, 0}, {3, 0}, {3, 1}}, got)
	require.Empty(t, o.endAll())
}

func TestMergePieces(t *testing.T) {
	t.Parallel()
	k, other := liveKey{1, 0}, liveKey{1, 1}
	for _, tc := range []struct {
		name       string
		prev, next livePiece
		want       livePiece
		merged     bool
	}{
		{"appends join", livePiece{key: k, text: "a", append: true}, livePiece{key: k, text: "b", append: true}, livePiece{key: k, text: "ab", append: true}, true},
		{"a start takes appends", livePiece{key: k, text: "a"}, livePiece{key: k, text: "b", append: true}, livePiece{key: k, text: "ab"}, true},
		{"a replacement wins", livePiece{key: k, text: "a", append: true}, livePiece{key: k, text: "xyz"}, livePiece{key: k, text: "xyz"}, true},
		{"the last chunk closes", livePiece{key: k, text: "a", append: true}, livePiece{key: k, append: true, lastChunk: true}, livePiece{key: k, text: "a", append: true, lastChunk: true}, true},
		{"calls stay apart", livePiece{key: k, text: "a"}, livePiece{key: other, text: "b", append: true}, livePiece{key: k, text: "a"}, false},
		{"nothing after the last chunk", livePiece{key: k, lastChunk: true, append: true}, livePiece{key: k, text: "b"}, livePiece{key: k, lastChunk: true, append: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := tc.prev
			require.Equal(t, tc.merged, merge(&got, tc.next))
			require.Equal(t, tc.want, got)
		})
	}
}

func TestLiveUpdateShapes(t *testing.T) {
	t.Parallel()
	p := livePiece{key: liveKey{3, 1}, text: "piece", append: true}
	b, err := json.Marshal(liveUpdate(dialectV1, "t1", "c1", p))
	require.NoError(t, err)
	require.JSONEq(t, `{"artifactUpdate":{"taskId":"t1","contextId":"c1","append":true,"lastChunk":false,
		"artifact":{"artifactId":"output-3-1","name":"step 3 output","parts":[{"text":"piece","mediaType":"text/plain"}],
		"metadata":{"errand":{"live_output":true,"step_no":3,"call_index":1}}}}}`, string(b))
	p.append, p.lastChunk = false, true
	b, err = json.Marshal(liveUpdate(dialectV03, "t1", "c1", p))
	require.NoError(t, err)
	require.JSONEq(t, `{"kind":"artifact-update","taskId":"t1","contextId":"c1","lastChunk":true,
		"artifact":{"artifactId":"output-3-1","name":"step 3 output","parts":[{"kind":"text","text":"piece"}],
		"metadata":{"errand":{"live_output":true,"step_no":3,"call_index":1}}}}`, string(b))
}

func TestStepKey(t *testing.T) {
	t.Parallel()
	k, ok := stepKey(json.RawMessage(`{"step_no":4,"call_index":2,"type":"llm"}`))
	require.True(t, ok)
	require.Equal(t, liveKey{4, 2}, k)
	_, ok = stepKey(json.RawMessage(`{"call_index":2}`))
	require.False(t, ok)
	_, ok = stepKey(json.RawMessage(`not json`))
	require.False(t, ok)
}

// FuzzLiveOutput feeds a stream's liveOutput the pieces a hub would send
// a watcher (in order, the text so far after a lag, merged in bursts) and
// checks that a client keeping artifacts by A2A's rules ends with the
// call's whole text.
func FuzzLiveOutput(f *testing.F) {
	f.Add("Hello, wörld! How are you?", []byte{3, 5, 0, 2, 9, 1})
	f.Add("日本語のテキスト", []byte{1, 1, 1, 0, 4})
	f.Fuzz(func(t *testing.T, text string, cuts []byte) {
		if !utf8.ValidString(text) || len(cuts) > 64 {
			t.Skip()
		}
		runes := []rune(text)
		o := newLiveOutput()
		c := newArtifactClient()
		var queue []livePiece
		push := func(p livePiece, ok bool) {
			if !ok {
				return
			}
			if n := len(queue); n > 0 && merge(&queue[n-1], p) {
				return
			}
			queue = append(queue, p)
		}
		pos := 0
		for i, cut := range cuts {
			n := min(int(cut%8), len(runes)-pos)
			switch {
			case cut == 0 && pos > 0:
				// The watcher fell behind: the text so far at offset 0.
				push(o.delta(live.Delta{StepNo: 1, Text: string(runes[:pos])}))
			case n > 0:
				push(o.delta(live.Delta{StepNo: 1, Offset: pos, Text: string(runes[pos : pos+n])}))
				pos += n
			}
			if i%3 == 2 {
				for _, p := range queue {
					c.apply(t, p)
				}
				queue = queue[:0]
			}
		}
		if pos < len(runes) {
			push(o.delta(live.Delta{StepNo: 1, Offset: pos, Text: string(runes[pos:])}))
		}
		push(o.end(liveKey{1, 0}))
		for _, p := range queue {
			c.apply(t, p)
		}
		if text == "" {
			require.Empty(t, c.text)
			return
		}
		require.Equal(t, text, c.text["output-1-0"])
		require.True(t, c.closed["output-1-0"])
	})
}
