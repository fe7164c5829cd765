package live

import (
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// watcher keeps what a subscriber would show: each call's text, by the
// rule a Delta documents (text[:Offset] + Text).
type watcher map[[2]int][]rune

func (w watcher) apply(t *testing.T, ds []Delta) {
	t.Helper()
	for _, d := range ds {
		k := [2]int{d.StepNo, d.CallIndex}
		have := w[k]
		require.LessOrEqual(t, d.Offset, len(have), "a delta leaves a gap: %+v after %q", d, string(have))
		w[k] = append(have[:d.Offset:d.Offset], []rune(d.Text)...)
	}
}

func (w watcher) text(step, call int) string { return string(w[[2]int{step, call}]) }

func TestPiecesArriveInOrderWithOffsetsInCharacters(t *testing.T) {
	t.Parallel()
	h := NewHub(Options{})
	s := h.Subscribe("tsk_a")
	t.Cleanup(s.Close)

	h.Write("tsk_a", 1, 0, "héllo ")
	h.Write("tsk_a", 1, 0, "wörld 🌍")
	h.Write("tsk_a", 1, 0, "!")
	h.Write("tsk_b", 1, 0, "another task")
	h.Write("tsk_a", 1, 0, "") // nothing

	<-s.Ready()
	require.Equal(t, []Delta{
		{TaskID: "tsk_a", StepNo: 1, Offset: 0, Text: "héllo "},
		{TaskID: "tsk_a", StepNo: 1, Offset: 6, Text: "wörld 🌍"},
		{TaskID: "tsk_a", StepNo: 1, Offset: 13, Text: "!"},
	}, s.Take())
	require.Empty(t, s.Take())
}

func TestLateJoinerGetsTextSoFarFirst(t *testing.T) {
	t.Parallel()
	h := NewHub(Options{})
	h.Write("tsk_a", 2, 1, "second call ")
	h.Write("tsk_a", 2, 0, "first ")
	h.Write("tsk_a", 2, 0, "call")

	s := h.Subscribe("tsk_a")
	t.Cleanup(s.Close)
	h.Write("tsk_a", 2, 0, "!")
	<-s.Ready()
	require.Equal(t, []Delta{
		{TaskID: "tsk_a", StepNo: 2, CallIndex: 0, Offset: 0, Text: "first call"},
		{TaskID: "tsk_a", StepNo: 2, CallIndex: 1, Offset: 0, Text: "second call "},
		{TaskID: "tsk_a", StepNo: 2, CallIndex: 0, Offset: 10, Text: "!"},
	}, s.Take())
	require.True(t, h.Watched("tsk_a"))
	require.False(t, h.Watched("tsk_b"))
}

// A subscriber that stops reading costs at most MaxQueued bytes; when it
// reads again it gets the text so far, which equals what it missed.
func TestSlowSubscriberDropsToTextSoFar(t *testing.T) {
	t.Parallel()
	const maxQueued = 1 << 10
	h := NewHub(Options{MaxQueued: maxQueued})
	slow := h.Subscribe("tsk_a")
	t.Cleanup(slow.Close)
	w := watcher{}

	var want strings.Builder
	for range 10_000 {
		h.Write("tsk_a", 1, 0, "ab")
		want.WriteString("ab")
		h.mu.Lock()
		require.LessOrEqual(t, slow.queued, maxQueued)
		require.LessOrEqual(t, len(slow.queue), maxQueued/queuedOverhead)
		h.mu.Unlock()
	}
	got := slow.Take()
	require.Len(t, got, 1, "one delta: the text so far")
	require.Zero(t, got[0].Offset)
	w.apply(t, got)
	require.Equal(t, want.String(), w.text(1, 0))

	// Caught up, it gets pieces again.
	h.Write("tsk_a", 1, 0, "c")
	w.apply(t, slow.Take())
	require.Equal(t, want.String()+"c", w.text(1, 0))
}

// Writers never wait for readers, however many and however slow.
func TestWritersNeverBlock(t *testing.T) {
	t.Parallel()
	h := NewHub(Options{MaxQueued: 512})
	for range 8 {
		s := h.Subscribe("tsk_a")
		t.Cleanup(s.Close) // never read
	}
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			for range 1000 {
				h.Write("tsk_a", 1, c, "piece ")
			}
			h.End("tsk_a", 1, c)
		})
	}
	wg.Wait()
	require.False(t, h.Running("tsk_a"))
}

func TestApplyMendsGapsAndOverlaps(t *testing.T) {
	t.Parallel()
	h := NewHub(Options{})
	s := h.Subscribe("tsk_r")
	t.Cleanup(s.Close)
	w := watcher{}
	apply := func(offset int, text string) []Delta {
		h.Apply(Delta{TaskID: "tsk_r", StepNo: 3, Offset: offset, Text: text}, false)
		got := s.Take()
		w.apply(t, got)
		return got
	}

	require.Len(t, apply(0, "abc"), 1)
	require.Empty(t, apply(5, "gap"), "a piece past a lost one is dropped")
	require.Empty(t, apply(1, "bc"), "a repeat sends nothing")
	require.Equal(t, []Delta{{TaskID: "tsk_r", StepNo: 3, Offset: 3, Text: "dé"}}, apply(1, "bcdé"), "only the extension is new")
	require.Equal(t, []Delta{{TaskID: "tsk_r", StepNo: 3, Offset: 2, Text: "ZZ"}}, apply(2, "ZZ"), "a different text replaces from its offset")
	require.Equal(t, "abZZ", w.text(3, 0))
	require.Equal(t, "abZZ", h.SoFar("tsk_r")[0].Text)
	require.Empty(t, apply(0, ""), "an empty piece is nothing")
	require.Empty(t, apply(-1, "x"), "a negative offset is nothing")

	h.Apply(Delta{TaskID: "tsk_r", StepNo: 3}, true)
	require.Empty(t, h.SoFar("tsk_r"))
}

// Taps see what this process's agents write, never what came from
// elsewhere, so a relay does not echo.
func TestTapSeesWritesAndEndsNotApplies(t *testing.T) {
	t.Parallel()
	h := NewHub(Options{})
	var seen []Change
	h.Tap(func(c Change) { seen = append(seen, c) })

	h.Write("tsk_a", 1, 0, "x")
	h.Apply(Delta{TaskID: "tsk_b", StepNo: 1, Text: "remote"}, false)
	h.End("tsk_a", 1, 0)
	h.End("tsk_a", 1, 0) // already over
	h.Apply(Delta{TaskID: "tsk_b", StepNo: 1}, true)
	require.Equal(t, []Change{
		{Delta: Delta{TaskID: "tsk_a", StepNo: 1, Text: "x"}},
		{Delta: Delta{TaskID: "tsk_a", StepNo: 1}, End: true},
	}, seen)
}

func TestEndTaskAndForget(t *testing.T) {
	t.Parallel()
	h := NewHub(Options{})
	h.Write("tsk_a", 1, 0, "local")
	h.Write("tsk_a", 2, 0, "local too")
	h.Apply(Delta{TaskID: "tsk_a", StepNo: 3, Text: "remote"}, false)

	h.EndTask("tsk_a")
	require.Equal(t, []Delta{{TaskID: "tsk_a", StepNo: 3, Text: "remote"}}, h.SoFar("tsk_a"), "EndTask ends this process's calls")
	h.Write("tsk_a", 4, 0, "local again")
	h.Forget("tsk_a")
	require.Equal(t, []Delta{{TaskID: "tsk_a", StepNo: 4, Text: "local again"}}, h.SoFar("tsk_a"), "Forget drops the remote ones")
}

// A task taken over from another process replaces the remote text.
func TestLocalWriteReplacesRemoteCall(t *testing.T) {
	t.Parallel()
	h := NewHub(Options{})
	h.Apply(Delta{TaskID: "tsk_a", StepNo: 1, Text: "from a dead daemon"}, false)
	s := h.Subscribe("tsk_a")
	t.Cleanup(s.Close)
	s.Take()
	h.Write("tsk_a", 1, 0, "again")
	require.Equal(t, []Delta{{TaskID: "tsk_a", StepNo: 1, Text: "again"}}, s.Take())
}

func TestSweepForgetsCallsUntouchedSinceBefore(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := NewHub(Options{Now: func() time.Time { return now }})
	h.Write("tsk_old", 1, 0, "stale")
	h.Apply(Delta{TaskID: "tsk_old", StepNo: 2, Text: "stale remote"}, false)
	now = now.Add(10 * time.Minute)
	h.Write("tsk_new", 1, 0, "fresh")

	h.Sweep(now.Add(-time.Minute))
	require.False(t, h.Running("tsk_old"))
	require.True(t, h.Running("tsk_new"))
}

func TestClosedSubscriberGetsNothing(t *testing.T) {
	t.Parallel()
	h := NewHub(Options{})
	s := h.Subscribe("tsk_a")
	s.Close()
	s.Close()
	h.Write("tsk_a", 1, 0, "x")
	require.Empty(t, s.Take())
	require.False(t, h.Watched("tsk_a"))
}

// Whatever pieces another process's relay delivers, in whatever order, a
// subscriber that applies the deltas it gets holds the hub's text so far.
func FuzzApply(f *testing.F) {
	f.Add([]byte{0, 3, 1, 2, 0, 5, 2, 1, 4})
	f.Add([]byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09"))
	const alphabet = "abcé🌍"
	f.Fuzz(func(t *testing.T, ops []byte) {
		h := NewHub(Options{MaxQueued: 1 << 20})
		s := h.Subscribe("tsk_f")
		defer s.Close()
		w := watcher{}
		for i := 0; i+2 < len(ops); i += 3 {
			call := int(ops[i] % 2)
			if ops[i]%7 == 6 {
				h.Apply(Delta{TaskID: "tsk_f", StepNo: 1, CallIndex: call}, true)
				delete(w, [2]int{1, call})
				continue
			}
			runes := []rune(alphabet)
			n := int(ops[i+2] % 6)
			text := make([]rune, n)
			for j := range text {
				text[j] = runes[(int(ops[i+1])+j)%len(runes)]
			}
			h.Apply(Delta{TaskID: "tsk_f", StepNo: 1, CallIndex: call, Offset: int(ops[i+1] % 8), Text: string(text)}, false)
			w.apply(t, s.Take())
		}
		for _, d := range h.SoFar("tsk_f") {
			require.Equal(t, d.Text, w.text(d.StepNo, d.CallIndex))
			require.True(t, utf8.ValidString(d.Text))
		}
	})
}

// A watcher waiting for a remote call's end is woken when it comes.
func TestOpenRemoteAndItsEnd(t *testing.T) {
	t.Parallel()
	h := NewHub(Options{})
	s := h.Subscribe("tsk_a")
	t.Cleanup(s.Close)
	h.Write("tsk_a", 1, 0, "local")
	h.Apply(Delta{TaskID: "tsk_a", StepNo: 2, Text: "remote"}, false)
	require.False(t, h.OpenRemote("tsk_a", 1, 0))
	require.True(t, h.OpenRemote("tsk_a", 2, 0))
	<-s.Ready()
	s.Take()

	h.Apply(Delta{TaskID: "tsk_a", StepNo: 2}, true)
	require.False(t, h.OpenRemote("tsk_a", 2, 0))
	select {
	case <-s.Ready():
	default:
		t.Fatal("the end did not wake the subscriber")
	}
	require.Empty(t, s.Take())
}
