package webhook

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/clock"
)

// Defaults of PushConfig.
const (
	// DefaultPushMaxAttempts is how often one push is tried before it is
	// dropped: with the default backoff, for about eight minutes.
	DefaultPushMaxAttempts = 10
	// DefaultPushMaxPending bounds the pushes waiting to be sent; the
	// journal is read no further until some are.
	DefaultPushMaxPending = 1000
)

// PushCursor names the journal cursor, and the lease, of the push
// Dispatcher.
const PushCursor = "a2a-push"

// Push is one notification to a receiver an A2A client named.
type Push struct {
	// Queue names the receiver's queue: pushes with the same Queue are
	// sent one at a time, in the order they were made; a receiver that
	// is slow or down holds back its own queue only.
	Queue string
	URL   string
	// ID is the webhook-id header: the same on every attempt, so the
	// receiver can drop a push it got twice.
	ID          string
	Body        []byte
	ContentType string
	// Header is added to the request: the client's token, its
	// Authorization.
	Header http.Header
	// Key signs the push as webhooks are signed (see Sign); empty sends
	// it unsigned.
	Key []byte
}

// PushSource says what each journal event pushes.
type PushSource interface {
	// Pushes returns the pushes ev makes, in the order they must arrive
	// (none for most events). It is called from one goroutine, in event
	// id order. An error is logged and the call made again after a
	// backoff: the event is not passed over.
	Pushes(ctx context.Context, ev *errand.Event) ([]*Push, error)
}

// PushConfig configures a PushDispatcher.
type PushConfig struct {
	// Source makes the pushes; Journal is the source of events and the
	// keeper of the cursor and the lease. Both required.
	Source  PushSource
	Journal Journal
	// AllowPrivate allows receivers at loopback, private, link-local and
	// other non-public addresses (see ErrPrivateAddress).
	AllowPrivate bool
	// Clock times attempts, backoffs and webhook-timestamp; default the
	// real clock.
	Clock clock.Clock
	// Logger reports failed attempts; default slog.Default().
	Logger *slog.Logger
	// Timeout bounds one attempt; default DefaultTimeout.
	Timeout time.Duration
	// BackoffBase and BackoffCap bound the delay between two attempts of a
	// push, as for webhooks; defaults DefaultBackoffBase and
	// DefaultBackoffCap.
	BackoffBase, BackoffCap time.Duration
	// MaxAttempts is how often a push is tried before it is dropped;
	// default DefaultPushMaxAttempts.
	MaxAttempts int
	// MaxPending bounds the pushes made and not yet sent or dropped;
	// default DefaultPushMaxPending.
	MaxPending int
	// CursorEvery is how many events that push nothing are read before
	// the cursor is saved; default DefaultCursorEvery.
	CursorEvery int
	// Owner and LeaseTTL name this Dispatcher on the lease PushCursor and
	// say how long it lasts unless renewed, as for webhooks (Config.Owner,
	// Config.LeaseTTL).
	Owner    string
	LeaseTTL time.Duration
	// OnAttemptFunc, if set, is called after every attempt with the URL,
	// the event id and nil or the attempt's error. It must not block.
	OnAttemptFunc func(url string, eventID int64, err error)
	// TracerProvider, when set and the Journal is a TaskReader, traces
	// each attempt of a push as a client span "a2a push" in the trace of
	// the run of the task it tells of, and sends its traceparent, as
	// Config.TracerProvider does for webhooks. Nil sends neither.
	TracerProvider trace.TracerProvider
	// Transport, if set, carries every request instead of the guarded
	// transport. For tests only: it bypasses the connect-time private
	// address check.
	Transport http.RoundTripper

	resolver *net.Resolver
	randFunc func() float64
}

func (c *PushConfig) withDefaults() *PushConfig {
	out := *c
	if out.Clock == nil {
		out.Clock = clock.New()
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	out.Timeout = cmp.Or(out.Timeout, DefaultTimeout)
	out.BackoffBase = cmp.Or(out.BackoffBase, DefaultBackoffBase)
	out.BackoffCap = cmp.Or(out.BackoffCap, DefaultBackoffCap)
	out.MaxAttempts = cmp.Or(out.MaxAttempts, DefaultPushMaxAttempts)
	out.MaxPending = cmp.Or(out.MaxPending, DefaultPushMaxPending)
	out.CursorEvery = cmp.Or(out.CursorEvery, DefaultCursorEvery)
	out.LeaseTTL = cmp.Or(out.LeaseTTL, DefaultLeaseTTL)
	if out.Owner == "" {
		out.Owner = defaultOwner()
	}
	if out.randFunc == nil {
		out.randFunc = rand.Float64
	}
	return &out
}

func (c *PushConfig) validate() error {
	switch {
	case c.Source == nil:
		return errors.New("no push source")
	case c.Journal == nil:
		return errors.New("no journal")
	case c.Timeout < 0:
		return fmt.Errorf("timeout %v is negative", c.Timeout)
	case c.BackoffBase < 0:
		return fmt.Errorf("backoff base %v is negative", c.BackoffBase)
	case c.BackoffCap < c.BackoffBase:
		return fmt.Errorf("backoff cap %v is below backoff base %v", c.BackoffCap, c.BackoffBase)
	case c.MaxAttempts < 1:
		return fmt.Errorf("max attempts %d is below 1", c.MaxAttempts)
	case c.MaxPending < 1:
		return fmt.Errorf("max pending %d is below 1", c.MaxPending)
	case c.CursorEvery < 0:
		return fmt.Errorf("cursor every %d is negative", c.CursorEvery)
	case c.LeaseTTL < time.Millisecond:
		return fmt.Errorf("lease ttl %v is below 1ms", c.LeaseTTL)
	}
	return nil
}

// PushDispatcher delivers the A2A push notifications its Source makes of
// journal events: signed and guarded as webhooks are, each push retried
// with a backoff up to MaxAttempts times, pushes of one queue in order and
// queues in parallel. It follows the journal from a durable cursor
// (PushCursor) that moves past an event once every push it made was sent
// or dropped, so a restart loses none and sends again at most those in
// flight. Of the Dispatchers sharing a journal, the one holding the lease
// PushCursor delivers.
type PushDispatcher struct {
	cfg       *PushConfig
	client    *http.Client
	transport *http.Transport // owned; nil with PushConfig.Transport
	log       *slog.Logger
	traces    *deliveryTracer // nil when traces are off

	mu      sync.Mutex
	running bool
}

// NewPush checks cfg and returns a PushDispatcher; Run starts it.
func NewPush(cfg PushConfig) (*PushDispatcher, error) {
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("push config: %w", err)
	}
	d := &PushDispatcher{cfg: c, log: c.Logger.With(slog.String("service", "a2a_push"))}
	d.traces = newDeliveryTracer(c.TracerProvider, c.Journal, d.log)
	rt := c.Transport
	if rt == nil {
		d.transport = newTransport(c.AllowPrivate, c.resolver)
		rt = d.transport
	}
	d.client = &http.Client{
		Transport:     rt,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return d, nil
}

// CheckURL reports whether a push (or webhook) may be sent to raw: an
// http(s) URL with a host, spelled as it is dialed, and, unless
// allowPrivate, not naming localhost or a literal non-public address (an
// error wrapping ErrPrivateAddress). A name that resolves to such an
// address is refused later, when connecting.
func CheckURL(raw string, allowPrivate bool) error {
	_, err := checkURL(raw, allowPrivate)
	return err
}

// Run delivers until ctx ends, then waits for the pushes in flight to be
// abandoned (they are sent again by whoever delivers next), saves the
// cursor, releases the lease and returns nil. It returns an error at once
// if the PushDispatcher is already running.
func (d *PushDispatcher) Run(ctx context.Context) error {
	d.mu.Lock()
	if d.running {
		d.mu.Unlock()
		return errors.New("push dispatcher: already running")
	}
	d.running = true
	d.mu.Unlock()
	defer func() {
		if d.transport != nil {
			d.transport.CloseIdleConnections()
		}
		d.mu.Lock()
		d.running = false
		d.mu.Unlock()
	}()
	l := &lease{journal: d.cfg.Journal, clock: d.cfg.Clock, name: PushCursor, owner: d.cfg.Owner, ttl: d.cfg.LeaseTTL, log: d.log, what: "push dispatcher"}
	l.hold(ctx, func(ctx context.Context) { (&pushRun{d: d, done: make(chan int64, d.cfg.MaxPending)}).run(ctx) })
	return nil
}

// pushRun is one term of delivery under the lease.
type pushRun struct {
	d *PushDispatcher

	pos   int64 // id of the last event read
	saved int64 // id last written to the cursor
	// open are the events read whose pushes are not all sent or dropped,
	// in id order, with how many are left of each.
	open    []int64
	left    map[int64]int
	pending int
	skipped int // events read since the cursor was last saved

	done    chan int64 // a push of this event was sent or dropped
	workers sync.WaitGroup
	qmu     sync.Mutex
	queues  map[string][]*queued // the queues with a worker, and what waits in them
}

type queued struct {
	push    *Push
	eventID int64
	taskID  string // the event's task, whose run trace the push joins
}

func (r *pushRun) run(ctx context.Context) {
	if !r.load(ctx) {
		return
	}
	r.left, r.queues = map[int64]int{}, map[string][]*queued{}
	workCtx, stopWork := context.WithCancel(ctx)
	defer func() {
		stopWork()
		r.workers.Wait()
		if errors.Is(context.Cause(ctx), errLeaseLost) {
			return // the cursor is the next holder's
		}
		saveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
		defer cancel()
		r.drainDone()
		r.save(saveCtx)
	}()
	failures := 0
	for ctx.Err() == nil {
		events, err := r.d.cfg.Journal.Follow(ctx, r.pos)
		if err == nil {
			if r.consume(ctx, workCtx, events) {
				failures = 0
			}
			if ctx.Err() != nil {
				return
			}
			err = errors.New("event stream ended")
		}
		if ctx.Err() != nil {
			return
		}
		failures++
		delay := r.backoff(failures)
		r.d.log.WarnContext(ctx, "follow journal", slog.Int64("after_id", r.pos), slog.Any("error", err), slog.Duration("retry_in", delay))
		if !r.sleep(ctx, delay) {
			return
		}
	}
}

// load reads the cursor, or starts a first run at the newest event (saved
// at once), retrying until it succeeds or ctx ends.
func (r *pushRun) load(ctx context.Context) bool {
	j := r.d.cfg.Journal
	for failures := 1; ; failures++ {
		id, found, err := j.Cursor(ctx, PushCursor)
		if err == nil && !found {
			if id, err = j.LastEventID(ctx); err == nil {
				err = j.SetCursor(ctx, PushCursor, id)
			}
		}
		if err == nil {
			r.pos, r.saved = id, id
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		delay := r.backoff(failures)
		r.d.log.WarnContext(ctx, "read push cursor", slog.Any("error", err), slog.Duration("retry_in", delay))
		if !r.sleep(ctx, delay) {
			return false
		}
	}
}

// consume reads events until the channel closes or ctx ends, and reports
// whether it received any. It reads no event while MaxPending pushes wait.
func (r *pushRun) consume(ctx, workCtx context.Context, events <-chan *errand.Event) (got bool) {
	for {
		in := events
		if r.pending >= r.d.cfg.MaxPending {
			in = nil
		}
		select {
		case <-ctx.Done():
			return got
		case id := <-r.done:
			if r.finished(id) {
				r.save(ctx)
			}
		case ev, ok := <-in:
			if !ok {
				return got
			}
			got = true
			if ev.ID <= r.pos {
				continue // seen before a re-follow
			}
			pushes, ok := r.pushes(ctx, ev)
			if !ok {
				return got
			}
			r.pos = ev.ID
			if len(pushes) == 0 {
				if r.skipped++; r.skipped >= r.d.cfg.CursorEvery {
					r.save(ctx)
				}
				continue
			}
			r.open = append(r.open, ev.ID)
			r.left[ev.ID] = len(pushes)
			r.pending += len(pushes)
			for _, p := range pushes {
				r.enqueue(workCtx, &queued{push: p, eventID: ev.ID, taskID: ev.TaskID})
			}
		}
	}
}

// pushes asks the source until it answers; false if ctx ended first.
func (r *pushRun) pushes(ctx context.Context, ev *errand.Event) ([]*Push, bool) {
	for failures := 1; ; failures++ {
		pushes, err := r.d.cfg.Source.Pushes(ctx, ev)
		if err == nil {
			return pushes, true
		}
		if ctx.Err() != nil {
			return nil, false
		}
		delay := r.backoff(failures)
		r.d.log.WarnContext(ctx, "make pushes", slog.Int64("event_id", ev.ID), slog.Any("error", err), slog.Duration("retry_in", delay))
		if !r.sleep(ctx, delay) {
			return nil, false
		}
	}
}

// finished counts one push of event id as sent or dropped, and reports
// whether the cursor moved: the oldest open event closed.
func (r *pushRun) finished(id int64) bool {
	r.pending--
	r.left[id]--
	moved := false
	for len(r.open) > 0 && r.left[r.open[0]] == 0 {
		delete(r.left, r.open[0])
		r.open = r.open[1:]
		moved = true
	}
	return moved
}

// drainDone takes the completions workers reported before they stopped.
func (r *pushRun) drainDone() {
	for {
		select {
		case id := <-r.done:
			r.finished(id)
		default:
			return
		}
	}
}

// cursor is how far every push has been sent or dropped.
func (r *pushRun) cursor() int64 {
	if len(r.open) > 0 {
		return r.open[0] - 1
	}
	return r.pos
}

// save writes the cursor if it moved; a failure is logged and the write
// tried again at the next save.
func (r *pushRun) save(ctx context.Context) {
	r.skipped = 0
	c := r.cursor()
	if c == r.saved || ctx.Err() != nil {
		return
	}
	if err := r.d.cfg.Journal.SetCursor(ctx, PushCursor, c); err != nil {
		if ctx.Err() == nil { // stopping: the save at the end writes it
			r.d.log.WarnContext(ctx, "save push cursor", slog.Int64("event_id", c), slog.Any("error", err))
		}
		return
	}
	r.saved = c
}

// enqueue adds q to its queue, starting the queue's worker if it has none.
func (r *pushRun) enqueue(ctx context.Context, q *queued) {
	r.qmu.Lock()
	defer r.qmu.Unlock()
	waiting, busy := r.queues[q.push.Queue]
	r.queues[q.push.Queue] = append(waiting, q)
	if !busy {
		r.workers.Go(func() { r.work(ctx, q.push.Queue) })
	}
}

// work sends the pushes of one queue in order until it is empty.
func (r *pushRun) work(ctx context.Context, queue string) {
	for {
		r.qmu.Lock()
		waiting := r.queues[queue]
		if len(waiting) == 0 || ctx.Err() != nil {
			delete(r.queues, queue)
			r.qmu.Unlock()
			return
		}
		q := waiting[0]
		r.queues[queue] = waiting[1:]
		r.qmu.Unlock()
		if !r.deliver(ctx, q) {
			return
		}
		select {
		case r.done <- q.eventID:
		case <-ctx.Done():
			return // not counted: sent again after a restart
		}
	}
}

// deliver tries q until it is sent or MaxAttempts attempts failed, and
// reports false if ctx ended first. A push to an address the guard
// refuses, literal or resolved, is dropped after its first attempt.
func (r *pushRun) deliver(ctx context.Context, q *queued) bool {
	p, cfg := q.push, r.d.cfg
	log := r.d.log.With(slog.Int64("event_id", q.eventID), slog.String("queue", p.Queue))
	if err := CheckURL(p.URL, cfg.AllowPrivate); err != nil {
		log.WarnContext(ctx, "push dropped", slog.Any("error", err))
		r.notify(p.URL, q.eventID, err)
		return true
	}
	out := &outgoing{url: p.URL, id: p.ID, body: p.Body, contentType: cmp.Or(p.ContentType, "application/json"), header: p.Header, key: p.Key}
	traced := r.d.traces.runContext(ctx, q.taskID)
	for attempt := 1; ; attempt++ {
		var err error
		if traced == nil {
			err = postOnce(ctx, r.d.client, cfg.Clock, cfg.Timeout, out)
		} else {
			span, header := r.d.traces.start(traced, pushSpan, p.Header, pushAttrs(q, attempt)...)
			traceOut := *out
			traceOut.header = header
			err = postOnce(ctx, r.d.client, cfg.Clock, cfg.Timeout, &traceOut)
			endAttempt(span, err)
		}
		if err == nil {
			log.DebugContext(ctx, "pushed", slog.Int("attempt", attempt))
			r.notify(p.URL, q.eventID, nil)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if errors.Is(err, ErrPrivateAddress) {
			// The guard refused the address the URL's name resolves to: a
			// refusal, not an outage, that no retry would change.
			log.WarnContext(ctx, "push dropped: its receiver's address is refused", slog.Int("attempt", attempt), slog.Any("error", err))
			r.notify(p.URL, q.eventID, err)
			return true
		}
		attrs := []any{slog.Int("attempt", attempt), slog.Any("error", err)}
		if se := (*StatusError)(nil); errors.As(err, &se) {
			attrs = append(attrs, slog.Int("status", se.StatusCode))
		}
		if attempt >= cfg.MaxAttempts {
			log.WarnContext(ctx, "push dropped after its last attempt", attrs...)
			r.notify(p.URL, q.eventID, err)
			return true
		}
		delay := r.backoff(attempt)
		// Armed before the failure is reported, so whoever hears of it
		// finds the retry already scheduled.
		timer := cfg.Clock.NewTimer(delay)
		log.WarnContext(ctx, "push failed", append(attrs, slog.Duration("retry_in", delay))...)
		r.notify(p.URL, q.eventID, err)
		select {
		case <-timer.C():
		case <-ctx.Done():
			timer.Stop()
			return false
		}
	}
}

func (r *pushRun) notify(url string, eventID int64, err error) {
	if r.d.cfg.OnAttemptFunc != nil {
		r.d.cfg.OnAttemptFunc(url, eventID, err)
	}
}

func (r *pushRun) backoff(attempt int) time.Duration {
	return backoffDelay(attempt, r.d.cfg.BackoffBase, r.d.cfg.BackoffCap, r.d.cfg.randFunc())
}

func (r *pushRun) sleep(ctx context.Context, d time.Duration) bool {
	timer := r.d.cfg.Clock.NewTimer(d)
	select {
	case <-timer.C():
		return true
	case <-ctx.Done():
		timer.Stop()
		return false
	}
}
