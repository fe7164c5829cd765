package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/live"
	"github.com/errandhq/errand/store"
)

// The relay carries live output between the processes of a shared store
// (store.OutputRelay), by interest: a process whose subscriptions follow a
// task says "want" every wantEvery; the process that runs the task relays
// its pieces while a want younger than wantTTL stands. A process that has
// just begun to follow a task asks for the text so far ("fresh"), which
// the runner sends at offset 0 before further pieces. Payloads are sent
// one at a time, each carrying everything that accumulated while the one
// before was being sent: the more output, the bigger the batches, not the
// more notifications. Each payload names its origin, so a process ignores
// its own.

const (
	// wantEvery is how often a process repeats which tasks it follows.
	wantEvery = 10 * time.Second
	// wantTTL is how long a runner keeps relaying a task after the last
	// want for it.
	wantTTL = 30 * time.Second
	// regapEvery spaces the asks for a task's text so far after lost
	// pieces, which keep coming until the answer arrives.
	regapEvery = time.Second
	// maxWanted bounds the tasks a runner remembers others want.
	maxWanted = 10_000
	// maxRelayPending bounds the bytes of pieces waiting to be sent; past
	// it they are dropped, and the text so far of the tasks sent instead.
	maxRelayPending = 1 << 20
)

// relay is one engine's end of the live output relay. It listens (and
// sends) while anyone uses it: a running pool, or a subscription
// following a task.
type relay struct {
	st     store.OutputRelay
	hub    *live.Hub
	clock  clock.Clock
	logger *slog.Logger
	origin string
	// sent counts the payloads sent (for benchmarks).
	sent atomic.Int64
	// onListen, when set, is called each time the relay starts
	// listening: a hook for tests.
	onListen func()

	mu      sync.Mutex
	users   int
	stop    context.CancelFunc
	stopped chan struct{}
	kick    chan struct{}
	// following counts this process's subscriptions by task; fresh holds
	// those whose text so far to ask for.
	following map[string]int
	fresh     map[string]bool
	askedAt   map[string]time.Time // after lost pieces
	// wanted holds, until when, the tasks other processes follow; resync
	// those whose text so far to send (true: after a reset, the pieces
	// before having been dropped).
	wanted       map[string]time.Time
	resync       map[string]bool
	pending      []live.Change
	pendingBytes int
}

func newRelay(st store.OutputRelay, hub *live.Hub, clk clock.Clock, logger *slog.Logger) *relay {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	r := &relay{
		st: st, hub: hub, clock: clk, origin: hex.EncodeToString(b),
		logger:    logger.With("service", "live_relay"),
		kick:      make(chan struct{}, 1),
		following: map[string]int{},
		fresh:     map[string]bool{},
		askedAt:   map[string]time.Time{},
		wanted:    map[string]time.Time{},
		resync:    map[string]bool{},
	}
	hub.Tap(r.tapped)
	return r
}

// acquire starts the relay if it was idle. A nil relay does nothing.
func (r *relay) acquire() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.users++
	if r.users > 1 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.stop, r.stopped = cancel, make(chan struct{})
	r.kick = make(chan struct{}, 1)
	r.kickLocked() // send what waits, such as a fresh want
	go r.run(ctx, r.kick, r.stopped)
}

// release stops the relay when its last user is gone, and waits for it.
func (r *relay) release() {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.users--
	if r.users > 0 {
		r.mu.Unlock()
		return
	}
	stop, stopped := r.stop, r.stopped
	r.stop, r.stopped = nil, nil
	clear(r.wanted)
	clear(r.resync)
	r.pending, r.pendingBytes = nil, 0
	r.mu.Unlock()
	stop()
	<-stopped
}

func (r *relay) kickLocked() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// follow says a subscription here follows the task.
func (r *relay) follow(taskID string) {
	r.acquire()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.following[taskID]++
	if r.following[taskID] == 1 {
		r.fresh[taskID] = true
		r.kickLocked()
	}
}

// unfollow ends a follow; the last one drops the task's remote text,
// whose end would no longer be heard.
func (r *relay) unfollow(taskID string) {
	r.mu.Lock()
	r.following[taskID]--
	last := r.following[taskID] <= 0
	if last {
		delete(r.following, taskID)
		delete(r.fresh, taskID)
		delete(r.askedAt, taskID)
	}
	r.mu.Unlock()
	if last {
		r.hub.Forget(taskID)
	}
	r.release()
}

// run sends batches and wants until ctx ends, and listens meanwhile.
func (r *relay) run(ctx context.Context, kick <-chan struct{}, stopped chan<- struct{}) {
	defer close(stopped)
	listened := make(chan struct{})
	go func() {
		defer close(listened)
		err := r.st.ListenOutput(ctx, r.heard)
		if err != nil && ctx.Err() == nil {
			r.logger.ErrorContext(ctx, "listen for live output", slog.String("error", err.Error()))
		}
	}()
	defer func() { <-listened }()
	var refresh clock.Ticker
	defer func() {
		if refresh != nil {
			refresh.Stop()
		}
	}()
	for {
		// The wants are repeated only while something here follows.
		r.mu.Lock()
		following := len(r.following) > 0
		r.mu.Unlock()
		var tick <-chan time.Time
		switch {
		case following && refresh == nil:
			refresh = r.clock.NewTicker(wantEvery)
		case !following && refresh != nil:
			refresh.Stop()
			refresh = nil
		}
		if refresh != nil {
			tick = refresh.C()
		}
		select {
		case <-ctx.Done():
			return
		case <-kick:
			r.flush(ctx, false)
		case <-tick:
			r.flush(ctx, true)
		}
	}
}

// tapped takes in a change this process's agents made: pending, if
// another process wants the task. Called with the hub locked.
func (r *relay) tapped(c live.Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	until, ok := r.wanted[c.Delta.TaskID]
	if !ok {
		return
	}
	if r.clock.Now().After(until) {
		delete(r.wanted, c.Delta.TaskID)
		return
	}
	if r.pendingBytes+len(c.Delta.Text) > maxRelayPending {
		// The sender fell behind: send the text so far instead.
		for _, p := range r.pending {
			r.resync[p.Delta.TaskID] = true
		}
		r.resync[c.Delta.TaskID] = true
		r.pending, r.pendingBytes = nil, 0
	} else {
		r.pending = append(r.pending, c)
		r.pendingBytes += len(c.Delta.Text) + 64
	}
	r.kickLocked()
}

// heard takes in a payload from any process ("" when the listener
// starts listening).
func (r *relay) heard(payload string) {
	if payload == "" {
		r.listening()
		return
	}
	msg, ok := decodeRelay(payload)
	if !ok || msg.Origin == r.origin {
		return
	}
	now := r.clock.Now()
	r.mu.Lock()
	for i, tasks := range [][]string{msg.Want, msg.Fresh} {
		for _, t := range tasks {
			until, known := r.wanted[t]
			if !known && len(r.wanted) >= maxWanted {
				r.dropExpiredLocked(now)
				if len(r.wanted) >= maxWanted {
					continue
				}
			}
			r.wanted[t] = now.Add(wantTTL)
			// A want this process did not hold (its fresh want was lost,
			// or it lapsed) asks for the text so far too.
			if _, queued := r.resync[t]; !queued && (i == 1 || !known || now.After(until)) {
				r.resync[t] = false
				r.kickLocked()
			}
		}
	}
	var apply []relayPiece
	for _, p := range msg.Pieces {
		if r.following[p.Task] > 0 {
			apply = append(apply, p)
		}
	}
	r.mu.Unlock()
	for _, p := range apply {
		if p.Reset {
			r.hub.Forget(p.Task)
			continue
		}
		d := live.Delta{TaskID: p.Task, StepNo: p.Step, CallIndex: p.Call, Offset: p.Offset, Text: p.Text}
		if !r.hub.Apply(d, p.End) {
			// A piece was lost: ask for the text so far.
			r.mu.Lock()
			if r.following[p.Task] > 0 && now.Sub(r.askedAt[p.Task]) >= regapEvery {
				r.askedAt[p.Task] = now
				r.fresh[p.Task] = true
				r.kickLocked()
			}
			r.mu.Unlock()
		}
	}
}

// listening: what was sent before may be lost, so the remote text of
// every task followed here is dropped and asked for afresh, and the text
// so far of every task others want from here is sent again (a fresh want
// may have been lost). Whichever side listens last, one of the two
// reaches the other.
func (r *relay) listening() {
	r.mu.Lock()
	tasks := slices.Collect(maps.Keys(r.following))
	for _, t := range tasks {
		r.fresh[t] = true
	}
	now := r.clock.Now()
	for t, until := range r.wanted {
		if _, queued := r.resync[t]; !queued && !now.After(until) {
			r.resync[t] = false
		}
	}
	r.kickLocked()
	r.mu.Unlock()
	for _, t := range tasks {
		r.hub.Forget(t)
	}
	if r.onListen != nil {
		r.onListen()
	}
}

func (r *relay) dropExpiredLocked(now time.Time) {
	for t, until := range r.wanted {
		if now.After(until) {
			delete(r.wanted, t)
		}
	}
}

// flush sends what waits: wants (all of them when refresh), then the
// text so far of tasks asked for fresh, then the pieces pending.
func (r *relay) flush(ctx context.Context, refresh bool) {
	r.mu.Lock()
	msg := relayMessage{Origin: r.origin}
	if refresh {
		msg.Want = slices.Sorted(maps.Keys(r.following))
	}
	msg.Fresh = slices.Sorted(maps.Keys(r.fresh))
	clear(r.fresh)
	resync := r.resync
	r.resync = map[string]bool{}
	pending := r.pending
	r.pending, r.pendingBytes = nil, 0
	r.mu.Unlock()

	var pieces []relayPiece
	for _, t := range slices.Sorted(maps.Keys(resync)) {
		if resync[t] {
			pieces = append(pieces, relayPiece{Task: t, Reset: true})
		}
		for _, d := range r.hub.SoFar(t) {
			if r.hub.OpenRemote(t, d.StepNo, d.CallIndex) {
				continue // its runner answers for it
			}
			pieces = append(pieces, relayPiece{Task: t, Step: d.StepNo, Call: d.CallIndex, Text: d.Text})
		}
	}
	pieces = append(pieces, mergePieces(pending)...)
	for _, p := range packRelay(msg, pieces) {
		if err := r.st.RelayOutput(ctx, p); err != nil {
			if ctx.Err() == nil {
				r.logger.WarnContext(ctx, "relay live output", slog.String("error", err.Error()))
			}
			return
		}
		r.sent.Add(1)
	}
}
