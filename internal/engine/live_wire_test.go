package engine

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/live"
	"github.com/errandhq/errand/store"
)

// unpackInto applies payloads to a hub as a receiving process would.
func unpackInto(t *testing.T, h *live.Hub, payloads []string) []relayMessage {
	t.Helper()
	var msgs []relayMessage
	for _, p := range payloads {
		require.LessOrEqual(t, len(p), store.MaxOutputPayload)
		m, ok := decodeRelay(p)
		require.True(t, ok, p)
		for _, pc := range m.Pieces {
			h.Apply(live.Delta{TaskID: pc.Task, StepNo: pc.Step, CallIndex: pc.Call, Offset: pc.Offset, Text: pc.Text}, pc.End)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// Long text is cut between characters into payloads under the limit, and
// the pieces rebuild it.
func TestPackRelayCutsLongTextByCharacters(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("plain \"quoted\" \\ é 🌍 \x01 \u2028 <&> \xff\n", 1500)
	want := string([]rune(text)) // JSON carries an invalid byte as U+FFFD
	payloads := packRelay(relayMessage{Origin: "me", Fresh: []string{"tsk_a"}},
		[]relayPiece{{Task: "tsk_a", Step: 1, Text: text}, {Task: "tsk_b", Step: 2, Call: 1, Text: "short"}})
	require.Greater(t, len(payloads), 5)

	h := live.NewHub(live.Options{})
	msgs := unpackInto(t, h, payloads)
	require.Equal(t, []string{"tsk_a"}, msgs[0].Fresh)
	require.Equal(t, []live.Delta{{TaskID: "tsk_a", StepNo: 1, Text: want}}, h.SoFar("tsk_a"))
	require.Equal(t, []live.Delta{{TaskID: "tsk_b", StepNo: 2, CallIndex: 1, Text: "short"}}, h.SoFar("tsk_b"))
}

func TestPackRelaySplitsManyWants(t *testing.T) {
	t.Parallel()
	var want []string
	for i := range 2000 {
		want = append(want, fmt.Sprintf("tsk_%026d", i))
	}
	payloads := packRelay(relayMessage{Origin: "me", Want: want}, nil)
	var got []string
	for _, m := range unpackInto(t, live.NewHub(live.Options{}), payloads) {
		got = append(got, m.Want...)
	}
	require.Equal(t, want, got)
	require.Empty(t, packRelay(relayMessage{Origin: "me"}, nil), "nothing to say, nothing sent")
}

func TestMergePiecesJoinsACallsPieces(t *testing.T) {
	t.Parallel()
	w := func(task string, call, offset int, text string) live.Change {
		return live.Change{Delta: live.Delta{TaskID: task, StepNo: 1, CallIndex: call, Offset: offset, Text: text}}
	}
	end := func(task string, call int) live.Change {
		return live.Change{Delta: live.Delta{TaskID: task, StepNo: 1, CallIndex: call}, End: true}
	}
	got := mergePieces([]live.Change{
		w("tsk_a", 0, 0, "hé"), w("tsk_a", 1, 0, "other call"), w("tsk_a", 0, 2, "llo"),
		end("tsk_a", 0), w("tsk_a", 0, 0, "again"), w("tsk_a", 1, 20, "after a gap"),
	})
	require.Equal(t, []relayPiece{
		{Task: "tsk_a", Step: 1, Text: "héllo"},
		{Task: "tsk_a", Step: 1, Call: 1, Text: "other call"},
		{Task: "tsk_a", Step: 1, End: true},
		{Task: "tsk_a", Step: 1, Text: "again"},
		{Task: "tsk_a", Step: 1, Call: 1, Offset: 20, Text: "after a gap"},
	}, got)
}

// What another process sends is never trusted to be well formed.
func FuzzDecodeRelay(f *testing.F) {
	f.Add(`{"o":"x","w":["tsk_a"],"n":["tsk_b"],"p":[{"t":"tsk_a","s":1,"c":0,"f":3,"x":"hi"},{"t":"tsk_a","e":true},{"t":"tsk_a","r":true}]}`)
	f.Add(`{"o":"x","p":[{"t":"tsk_a","s":-1,"f":-5,"x":"\ud800"}]}`)
	f.Add(`not json`)
	f.Fuzz(func(t *testing.T, payload string) {
		r := newRelay(nil, live.NewHub(live.Options{}), clock.NewFake(testStart), slog.New(slog.DiscardHandler))
		r.following["tsk_a"] = 1
		r.heard(payload)
		for _, d := range r.hub.SoFar("tsk_a") {
			require.NotEmpty(t, d.Text)
		}
	})
}

// Whatever the text, the payloads fit and rebuild it.
func FuzzPackRelay(f *testing.F) {
	f.Add("hello", 3)
	f.Add(strings.Repeat("\x00\"é🌍\xff", 3000), 0)
	f.Fuzz(func(t *testing.T, text string, offset int) {
		if offset < 0 || offset > 1<<20 {
			return
		}
		payloads := packRelay(relayMessage{Origin: "me"}, []relayPiece{{Task: "tsk_f", Step: 1, Offset: offset, Text: text}})
		var got []rune
		next := offset
		for _, p := range payloads {
			require.LessOrEqual(t, len(p), store.MaxOutputPayload)
			m, ok := decodeRelay(p)
			require.True(t, ok)
			for _, pc := range m.Pieces {
				require.Equal(t, next, pc.Offset)
				got = append(got, []rune(pc.Text)...)
				next += len([]rune(pc.Text))
			}
		}
		require.Equal(t, string([]rune(text)), string(got))
	})
}
