package engine

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/live"
)

// memBus is a store.OutputRelay for processes in one test: a payload
// reaches every listener, in order, as NOTIFY does.
type memBus struct {
	mu        sync.Mutex
	listeners map[*func(string)]struct{}
	sent      []string
}

func newMemBus() *memBus { return &memBus{listeners: map[*func(string)]struct{}{}} }

func (m *memBus) RelayOutput(_ context.Context, payload string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent = append(m.sent, payload)
	for f := range m.listeners {
		(*f)(payload)
	}
	return nil
}

func (m *memBus) ListenOutput(ctx context.Context, f func(string)) error {
	m.mu.Lock()
	m.listeners[&f] = struct{}{}
	f("")
	m.mu.Unlock()
	<-ctx.Done()
	m.mu.Lock()
	delete(m.listeners, &f)
	m.mu.Unlock()
	return ctx.Err()
}

// relayProcess is one process on a memBus: its hub and relay.
type relayProcess struct {
	hub       *live.Hub
	relay     *relay
	clock     *clock.Fake
	listening chan struct{}
}

func newRelayProcess(t *testing.T, bus *memBus) *relayProcess {
	t.Helper()
	clk := clock.NewFake(testStart)
	hub := live.NewHub(live.Options{Now: clk.Now})
	p := &relayProcess{hub: hub, clock: clk, listening: make(chan struct{}, 16),
		relay: newRelay(bus, hub, clk, slog.New(slog.DiscardHandler))}
	p.relay.onListen = func() { p.listening <- struct{}{} }
	return p
}

// textWatch keeps the text a hub subscription's deltas build.
type textWatch struct {
	sub *live.Sub
	w   watcher
}

func watchText(t *testing.T, h *live.Hub, taskID string) *textWatch {
	t.Helper()
	sub := h.Subscribe(taskID)
	t.Cleanup(sub.Close)
	return &textWatch{sub: sub, w: watcher{}}
}

// wait waits until the text of step 1, call 0 is text.
func (tw *textWatch) wait(t *testing.T, text string) {
	t.Helper()
	for tw.w.text(1, 0) != text {
		recv(t, tw.sub.Ready())
		for _, d := range tw.sub.Take() {
			k := [2]int{d.StepNo, d.CallIndex}
			tw.w[k] = append(tw.w[k][:d.Offset:d.Offset], []rune(d.Text)...)
		}
	}
}

type watcher map[[2]int][]rune

func (w watcher) text(step, call int) string { return string(w[[2]int{step, call}]) }

// A runner that lost a watcher's want (it restarted, or the want lapsed)
// relays nothing; the watcher's next want, which the runner did not hold,
// brings the text so far.
func TestRelayRecoversALostWant(t *testing.T) {
	t.Parallel()
	bus := newMemBus()
	watching, running := newRelayProcess(t, bus), newRelayProcess(t, bus)
	running.relay.acquire()
	t.Cleanup(running.relay.release)
	recv(t, running.listening)
	running.hub.Write("tsk_a", 1, 0, "written while ")

	sub := watchText(t, watching.hub, "tsk_a")
	watching.relay.follow("tsk_a")
	t.Cleanup(func() { watching.relay.unfollow("tsk_a") })
	sub.wait(t, "written while ")

	running.relay.mu.Lock()
	clear(running.relay.wanted)
	running.relay.mu.Unlock()
	running.hub.Write("tsk_a", 1, 0, "nobody asked")
	running.relay.mu.Lock()
	require.Empty(t, running.relay.pending, "not relayed")
	running.relay.mu.Unlock()

	waitForTicker(t, watching.clock, "(*relay).run", wantEvery)
	watching.clock.Advance(wantEvery)
	sub.wait(t, "written while nobody asked")
	running.hub.Write("tsk_a", 1, 0, ", then more")
	sub.wait(t, "written while nobody asked, then more")
}

// A runner stops relaying a task when its wants stop.
func TestRelayInterestLapses(t *testing.T) {
	t.Parallel()
	running := newRelayProcess(t, newMemBus())
	running.relay.heard(encodeRelay(relayMessage{Origin: "other", Fresh: []string{"tsk_a"}}))
	running.hub.Write("tsk_a", 1, 0, "wanted")
	require.Len(t, running.relay.pending, 1)

	running.clock.Advance(wantTTL + 1)
	running.hub.Write("tsk_a", 1, 0, " no longer")
	require.Len(t, running.relay.pending, 1)
	require.NotContains(t, running.relay.wanted, "tsk_a")

	running.relay.heard(encodeRelay(relayMessage{Origin: running.relay.origin, Want: []string{"tsk_b"}}))
	require.NotContains(t, running.relay.wanted, "tsk_b", "a process ignores its own payloads")
}

// A runner whose pieces pile up past its bound drops them and sends,
// after a reset, the text so far; the watcher ends with the same text.
func TestRelayOverflowSendsTextSoFar(t *testing.T) {
	t.Parallel()
	bus := newMemBus()
	running := newRelayProcess(t, bus)
	running.relay.heard(encodeRelay(relayMessage{Origin: "watcher", Fresh: []string{"tsk_a"}}))
	clear(running.relay.resync)

	piece := strings.Repeat("x", 4096)
	var want strings.Builder
	for range maxRelayPending/len(piece) + 2 {
		running.hub.Write("tsk_a", 1, 0, piece)
		want.WriteString(piece)
		require.LessOrEqual(t, running.relay.pendingBytes, maxRelayPending)
	}
	require.Equal(t, map[string]bool{"tsk_a": true}, running.relay.resync)
	running.relay.flush(t.Context(), false)

	watching := newRelayProcess(t, newMemBus())
	watching.relay.following["tsk_a"] = 1
	watching.hub.Apply(live.Delta{TaskID: "tsk_a", StepNo: 1, Text: "stale text"}, false)
	for _, p := range bus.sent {
		watching.relay.heard(p)
	}
	require.Equal(t, []live.Delta{{TaskID: "tsk_a", StepNo: 1, Text: want.String()}}, watching.hub.SoFar("tsk_a"))
}

// Only the runner answers a fresh want: another watcher's copy of the
// text, which may be stale, is not sent.
func TestRelayWatcherDoesNotAnswerForTheRunner(t *testing.T) {
	t.Parallel()
	bus := newMemBus()
	w := newRelayProcess(t, bus)
	w.relay.following["tsk_a"] = 1
	w.relay.heard(encodeRelay(relayMessage{Origin: "runner", Pieces: []relayPiece{{Task: "tsk_a", Step: 1, Text: "relayed"}}}))
	require.True(t, w.hub.OpenRemote("tsk_a", 1, 0))

	w.relay.heard(encodeRelay(relayMessage{Origin: "another watcher", Fresh: []string{"tsk_a"}}))
	w.relay.flush(t.Context(), false)
	require.Empty(t, bus.sent)
}
