// Package live carries the text a running agent produces, piece by piece,
// from the agent to whoever watches its task: the model's words as they
// stream in, an exec agent's output lines. Pieces are not journal events:
// nothing is written to the store, and a piece lives only while its call
// runs. A watcher that joins mid-call first gets the text so far.
//
// A Hub never blocks its writers. Each subscriber has a bounded queue; one
// that falls behind loses its queue and gets the text so far of each live
// call instead, so a stalled client costs a bounded amount of memory.
package live

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// EventType is the type a Delta travels under on the task's event streams.
const EventType = "task.output.delta"

// Delta is one piece of the text of one call of a step. Offset counts the
// characters (Unicode code points) of the call's text before Text: a
// watcher keeps text[:Offset] + Text. A delta with Offset 0 may replace
// what a watcher has (a late joiner's, or a lagging one's, text so far).
type Delta struct {
	TaskID    string `json:"-"`
	StepNo    int    `json:"step_no"`
	CallIndex int    `json:"call_index"`
	Offset    int    `json:"offset"`
	Text      string `json:"text"`
}

// Change is what a Hub's tap sees: a piece written by this process's
// agents, or (End set) the end of a call.
type Change struct {
	Delta Delta
	End   bool
}

// Limits of a Hub.
const (
	// DefaultMaxQueued bounds the bytes one subscriber may have waiting
	// (its pieces' text plus queuedOverhead each); past it the subscriber
	// drops to the text so far.
	DefaultMaxQueued = 256 << 10
	// MaxCallText bounds the text kept for one call; pieces past it are
	// dropped (no model reply comes near it).
	MaxCallText = 4 << 20
)

// Options configure a Hub.
type Options struct {
	MaxQueued int              // bytes; 0 is DefaultMaxQueued
	Now       func() time.Time // for Sweep; nil is time.Now
}

type callKey struct {
	task       string
	step, call int
}

type call struct {
	text    []byte
	runes   int
	touched time.Time
	// remote: the call runs in another process and came through Apply.
	remote bool
}

// queuedOverhead is what a queued piece costs beyond its text, counted
// against MaxQueued so that many tiny pieces are bounded too.
const queuedOverhead = 64

// Hub holds the text so far of every live call and fans pieces out to
// subscribers.
type Hub struct {
	maxQueued int

	mu    sync.Mutex
	calls map[callKey]*call
	subs  map[string]map[*Sub]struct{}
	taps  []func(Change)
	now   func() time.Time
}

// NewHub returns an empty Hub.
func NewHub(opts Options) *Hub {
	if opts.MaxQueued <= 0 {
		opts.MaxQueued = DefaultMaxQueued
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Hub{
		maxQueued: opts.MaxQueued,
		calls:     map[callKey]*call{},
		subs:      map[string]map[*Sub]struct{}{},
		now:       opts.Now,
	}
}

// Tap calls f with every piece this process's agents write and every end
// of a call (Write and End, not Apply): what a relay sends to other
// processes. f is called with the hub locked and must not block.
func (h *Hub) Tap(f func(Change)) {
	h.mu.Lock()
	h.taps = append(h.taps, f)
	h.mu.Unlock()
}

// Write appends text to the call's text and sends it to the task's
// subscribers. It never blocks.
func (h *Hub) Write(taskID string, stepNo, callIndex int, text string) {
	if text == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	k := callKey{taskID, stepNo, callIndex}
	c := h.calls[k]
	if c == nil || c.remote {
		// A call another process ran before this one took the task over
		// is replaced: watchers get this piece at offset 0.
		c = &call{}
		h.calls[k] = c
	}
	if len(c.text)+len(text) > MaxCallText {
		return
	}
	d := Delta{TaskID: taskID, StepNo: stepNo, CallIndex: callIndex, Offset: c.runes, Text: text}
	c.text = append(c.text, text...)
	c.runes += utf8.RuneCountInString(text)
	c.touched = h.now()
	h.fanOut(d)
	for _, f := range h.taps {
		f(Change{Delta: d})
	}
}

// End forgets the call's text: the call is over and its step record now
// holds the text.
func (h *Hub) End(taskID string, stepNo, callIndex int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := callKey{taskID, stepNo, callIndex}
	if _, ok := h.calls[k]; !ok {
		return
	}
	delete(h.calls, k)
	for _, f := range h.taps {
		f(Change{Delta: Delta{TaskID: taskID, StepNo: stepNo, CallIndex: callIndex}, End: true})
	}
}

// EndTask forgets every live call this process's agents wrote for the
// task (its attempt is over).
func (h *Hub) EndTask(taskID string) {
	h.mu.Lock()
	var ended []callKey
	for k, c := range h.calls {
		if k.task == taskID && !c.remote {
			ended = append(ended, k)
		}
	}
	h.mu.Unlock()
	for _, k := range ended {
		h.End(k.task, k.step, k.call)
	}
}

// Apply takes in a piece written in another process: the call's text
// becomes its first Offset characters followed by Text (a piece that
// would leave a gap is dropped). Subscribers get only what changed: a
// piece that repeats text the call already has (a resent text so far)
// sends nothing, one that extends it sends the extension. end forgets the
// call instead. Taps do not see applied pieces. It reports false for a
// piece dropped because of a gap: the text so far should be asked for.
func (h *Hub) Apply(d Delta, end bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := callKey{d.TaskID, d.StepNo, d.CallIndex}
	if end {
		if _, ok := h.calls[k]; ok {
			delete(h.calls, k)
			for s := range h.subs[d.TaskID] {
				s.signal() // for whoever waits for the end (see OpenRemote)
			}
		}
		return true
	}
	if d.Offset < 0 || d.Text == "" {
		return true
	}
	c := h.calls[k]
	if c == nil {
		c = &call{remote: true}
		h.calls[k] = c
	}
	if d.Offset > c.runes {
		return false // a piece before it was lost
	}
	c.touched = h.now()
	if d.Offset < c.runes {
		at := ByteOffset(c.text, d.Offset)
		have := string(c.text[at:])
		switch {
		case strings.HasPrefix(have, d.Text):
			return true // nothing new
		case strings.HasPrefix(d.Text, have):
			// Only the part past what the call has is new.
			d.Text, d.Offset = d.Text[len(have):], c.runes
		default:
			// The text differs from Offset on (a new attempt of the call):
			// watchers replace it from there.
			c.text = c.text[:at]
			c.runes = d.Offset
		}
	}
	if len(c.text)+len(d.Text) > MaxCallText {
		return true
	}
	c.text = append(c.text, d.Text...)
	c.runes += utf8.RuneCountInString(d.Text)
	h.fanOut(d)
	return true
}

// OpenRemote reports whether the call, which another process runs, has
// pieces here and has not ended: its step's record may be committed while
// its last pieces are still on their way. The task's subscribers are
// signalled when such a call ends.
func (h *Hub) OpenRemote(taskID string, stepNo, callIndex int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.calls[callKey{taskID, stepNo, callIndex}]
	return c != nil && c.remote
}

// Forget drops the task's calls that came from another process through
// Apply, telling no one: nobody here follows the task any more, so their
// ends would go unheard and their text become stale.
func (h *Hub) Forget(taskID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, c := range h.calls {
		if k.task == taskID && c.remote {
			delete(h.calls, k)
		}
	}
}

// Sweep forgets calls no piece touched since before: those of a process
// that stopped without ending them.
func (h *Hub) Sweep(before time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, c := range h.calls {
		if c.touched.Before(before) {
			delete(h.calls, k)
		}
	}
}

// Running reports whether the task has a live call in this hub.
func (h *Hub) Running(taskID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range h.calls {
		if k.task == taskID {
			return true
		}
	}
	return false
}

// SoFar is the text so far of each of the task's live calls, as deltas at
// offset 0, in step and call order.
func (h *Hub) SoFar(taskID string) []Delta {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.soFar(taskID)
}

func (h *Hub) soFar(taskID string) []Delta {
	var out []Delta
	for k, c := range h.calls {
		if k.task == taskID && len(c.text) > 0 {
			out = append(out, Delta{TaskID: taskID, StepNo: k.step, CallIndex: k.call, Text: string(c.text)})
		}
	}
	slices.SortFunc(out, func(a, b Delta) int {
		return cmp.Or(cmp.Compare(a.StepNo, b.StepNo), cmp.Compare(a.CallIndex, b.CallIndex))
	})
	return out
}

// Subscribe follows the task's pieces. The subscription first holds the
// text so far of each live call; Close ends it.
func (h *Hub) Subscribe(taskID string) *Sub {
	s := &Sub{hub: h, task: taskID, ready: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	set := h.subs[taskID]
	if set == nil {
		set = map[*Sub]struct{}{}
		h.subs[taskID] = set
	}
	set[s] = struct{}{}
	for _, d := range h.soFar(taskID) {
		s.push(d, h.maxQueued)
	}
	return s
}

// Watched reports whether anyone in this process follows the task.
func (h *Hub) Watched(taskID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[taskID]) > 0
}

func (h *Hub) fanOut(d Delta) {
	for s := range h.subs[d.TaskID] {
		s.push(d, h.maxQueued)
	}
}

// Sub is one watcher's queue of a task's pieces.
type Sub struct {
	hub   *Hub
	task  string
	ready chan struct{}

	// Guarded by hub.mu.
	queue  []Delta
	queued int
	lagged bool
	closed bool
}

func (s *Sub) push(d Delta, max int) {
	if s.closed {
		return
	}
	if s.lagged {
		s.signal()
		return // it will get the text so far
	}
	size := len(d.Text) + queuedOverhead
	if s.queued+size > max {
		s.queue, s.queued, s.lagged = nil, 0, true
		s.signal()
		return
	}
	s.queue = append(s.queue, d)
	s.queued += size
	s.signal()
}

func (s *Sub) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Ready receives when Take has something.
func (s *Sub) Ready() <-chan struct{} { return s.ready }

// Take returns the pieces waiting, oldest first; for a subscriber that
// fell behind, the text so far of each live call instead.
func (s *Sub) Take() []Delta {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	if s.lagged {
		s.lagged = false
		return s.hub.soFar(s.task)
	}
	out := s.queue
	s.queue, s.queued = nil, 0
	return out
}

// Close ends the subscription.
func (s *Sub) Close() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	s.queue = nil
	if set := s.hub.subs[s.task]; set != nil {
		delete(set, s)
		if len(set) == 0 {
			delete(s.hub.subs, s.task)
		}
	}
}

// ByteOffset is the byte index of the n-th character of b: where a piece
// at offset n joins a call's text.
func ByteOffset(b []byte, n int) int {
	i := 0
	for ; n > 0 && i < len(b); n-- {
		_, size := utf8.DecodeRune(b[i:])
		i += size
	}
	return i
}
