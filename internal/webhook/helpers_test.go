package webhook

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/clock"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitTimeout bounds every wait on a signal; reaching it fails the test.
const waitTimeout = 10 * time.Second

var testStart = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// testKey signs the test hooks' deliveries.
var testKey = []byte("test-secret")

// fakeJournal is an in-memory Journal. Follow streams from a snapshot of
// the events and wakes when more are appended. Leases follow the store's
// rules on the time of clock.
type fakeJournal struct {
	mu           sync.Mutex
	events       []*errand.Event
	cursors      map[string]int64
	cursorWrites map[string][]int64
	changed      chan struct{} // closed and replaced on append
	followErrs   int           // Follow fails this many more times
	follows      int
	clock        clock.Clock
	leases       map[string]fakeLease
	leadErrs     map[string]error // Lead and Unlead by this owner fail with it
	ops          []string         // "set <name> <id>" and "unlead <name> <owner>", in order

	// leads gets every Lead call's outcome.
	leads chan leadCall

	// sent gets the id of every event a Follow channel handed out.
	sent chan int64
	// written gets the name of every cursor written.
	written chan string
}

func newFakeJournal() *fakeJournal {
	return &fakeJournal{
		cursors:      map[string]int64{},
		cursorWrites: map[string][]int64{},
		changed:      make(chan struct{}),
		clock:        clock.New(),
		leases:       map[string]fakeLease{},
		leadErrs:     map[string]error{},
		leads:        make(chan leadCall, 1000),
		sent:         make(chan int64, 1000),
		written:      make(chan string, 1000),
	}
}

// fakeLease is who holds a lease and until when.
type fakeLease struct {
	owner   string
	expires time.Time
}

// leadCall is the outcome of one Lead call.
type leadCall struct {
	name, owner string
	held        bool
	err         error
}

var _ Journal = (*fakeJournal)(nil)

// add appends events of the given types and returns them.
func (j *fakeJournal) add(types ...string) []*errand.Event {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []*errand.Event
	for _, typ := range types {
		id := int64(len(j.events) + 1)
		ev := &errand.Event{
			ID: id, Type: typ, TaskID: "tsk_" + strconv.FormatInt(id, 10), Actor: errand.ActorSystem,
			Data:      json.RawMessage(fmt.Sprintf(`{"n":%d}`, id)),
			CreatedAt: testStart.Add(time.Duration(id) * time.Second),
		}
		j.events = append(j.events, ev)
		out = append(out, ev)
	}
	close(j.changed)
	j.changed = make(chan struct{})
	return out
}

func (j *fakeJournal) Follow(ctx context.Context, afterID int64) (<-chan *errand.Event, error) {
	j.mu.Lock()
	j.follows++
	if j.followErrs > 0 {
		j.followErrs--
		j.mu.Unlock()
		return nil, fmt.Errorf("journal unavailable")
	}
	j.mu.Unlock()
	ch := make(chan *errand.Event)
	go func() {
		defer close(ch)
		next := afterID
		for {
			j.mu.Lock()
			var pending []*errand.Event
			for _, ev := range j.events {
				if ev.ID > next {
					pending = append(pending, ev)
				}
			}
			changed := j.changed
			j.mu.Unlock()
			for _, ev := range pending {
				select {
				case ch <- ev:
					next = ev.ID
					j.sent <- ev.ID
				case <-ctx.Done():
					return
				}
			}
			if len(pending) == 0 {
				select {
				case <-changed:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return ch, nil
}

func (j *fakeJournal) Cursor(_ context.Context, name string) (int64, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	id, ok := j.cursors[name]
	return id, ok, nil
}

func (j *fakeJournal) SetCursor(_ context.Context, name string, eventID int64) error {
	j.mu.Lock()
	j.cursors[name] = eventID
	j.cursorWrites[name] = append(j.cursorWrites[name], eventID)
	j.ops = append(j.ops, fmt.Sprintf("set %s %d", name, eventID))
	j.mu.Unlock()
	j.written <- name
	return nil
}

func (j *fakeJournal) LastEventID(context.Context) (int64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return int64(len(j.events)), nil
}

func (j *fakeJournal) Lead(_ context.Context, name, owner string, ttl time.Duration) (bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	call := leadCall{name: name, owner: owner, err: j.leadErrs[owner]}
	if call.err == nil {
		now := j.clock.Now()
		l, ok := j.leases[name]
		if !ok || l.owner == owner || !l.expires.After(now) {
			j.leases[name] = fakeLease{owner: owner, expires: now.Add(ttl)}
			call.held = true
		}
	}
	select {
	case j.leads <- call:
	default: // nobody is listening
	}
	return call.held, call.err
}

func (j *fakeJournal) Unlead(_ context.Context, name, owner string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.leadErrs[owner]; err != nil {
		return err
	}
	j.ops = append(j.ops, fmt.Sprintf("unlead %s %s", name, owner))
	if j.leases[name].owner == owner {
		delete(j.leases, name)
	}
	return nil
}

// holder returns who holds the lease name, "" if nobody.
func (j *fakeJournal) holder(name string) string {
	j.mu.Lock()
	defer j.mu.Unlock()
	l, ok := j.leases[name]
	if !ok || !l.expires.After(j.clock.Now()) {
		return ""
	}
	return l.owner
}

// setLeadErr makes owner's Lead and Unlead calls fail with err (nil: work
// again).
func (j *fakeJournal) setLeadErr(owner string, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.leadErrs[owner] = err
}

// opLog returns the cursor writes and releases so far, in order.
func (j *fakeJournal) opLog() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.ops)
}

// waitLead waits for a Lead call by owner and returns its outcome.
func (j *fakeJournal) waitLead(t *testing.T, owner string) leadCall {
	t.Helper()
	for {
		select {
		case c := <-j.leads:
			if c.owner == owner {
				return c
			}
		case <-time.After(waitTimeout):
			require.FailNow(t, "no Lead call", "owner %s", owner)
			return leadCall{}
		}
	}
}

func (j *fakeJournal) cursor(t *testing.T, name string) int64 {
	t.Helper()
	id, ok, err := j.Cursor(context.Background(), name)
	require.NoError(t, err)
	require.True(t, ok, "cursor %s not saved", name)
	return id
}

func (j *fakeJournal) writes(name string) []int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.cursorWrites[name])
}

// waitSent waits until a Follow channel handed out event id.
func (j *fakeJournal) waitSent(t *testing.T, id int64) {
	t.Helper()
	for {
		select {
		case got := <-j.sent:
			if got == id {
				return
			}
		case <-time.After(waitTimeout):
			require.FailNow(t, "event not handed out", "id %d", id)
		}
	}
}

// recordingClock is a Fake that also records the duration of every timer.
type recordingClock struct {
	*clock.Fake
	mu        sync.Mutex
	durations []time.Duration
}

func (c *recordingClock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	c.durations = append(c.durations, d)
	c.mu.Unlock()
	return c.Fake.NewTimer(d)
}

// timers returns the durations of the timers made so far, except those of
// length except (the attempt timeouts).
func (c *recordingClock) timers(except time.Duration) []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Duration
	for _, d := range c.durations {
		if d != except {
			out = append(out, d)
		}
	}
	return out
}

// attempt is one call of OnAttemptFunc.
type attempt struct {
	hook    string
	eventID int64
	err     error
}

type testBundle struct {
	clock    *recordingClock
	journal  *fakeJournal
	attempts chan attempt
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	b := &testBundle{
		clock:    &recordingClock{Fake: clock.NewFake(testStart)},
		journal:  newFakeJournal(),
		attempts: make(chan attempt, 1000),
	}
	b.journal.clock = b.clock
	return b
}

// config returns a Config over the bundle with no jitter.
func (b *testBundle) config(t *testing.T, hooks ...Hook) Config {
	t.Helper()
	return Config{
		Hooks:   hooks,
		Journal: b.journal,
		Clock:   b.clock,
		Logger:  testLogger(t),
		OnAttemptFunc: func(hook string, eventID int64, err error) {
			b.attempts <- attempt{hook, eventID, err}
		},
		randFunc: func() float64 { return 0 },
	}
}

// start runs a Dispatcher over cfg and returns a function that stops it
// and waits for Run to return; it is also called at cleanup.
func (b *testBundle) start(t *testing.T, cfg Config) (stop func()) {
	t.Helper()
	d, err := New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(waitTimeout):
				require.FailNow(t, "Run did not return after cancel")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// nextAttempt waits for the next OnAttemptFunc call.
func (b *testBundle) nextAttempt(t *testing.T) attempt {
	t.Helper()
	select {
	case a := <-b.attempts:
		return a
	case <-time.After(waitTimeout):
		require.FailNow(t, "no delivery attempt")
		return attempt{}
	}
}

// delivered waits for the next attempt and requires it succeeded for id.
func (b *testBundle) delivered(t *testing.T, hook string, id int64) {
	t.Helper()
	a := b.nextAttempt(t)
	require.NoError(t, a.err)
	require.Equal(t, attempt{hook: hook, eventID: id}, a)
}

// startAt saves the cursor of url, as if the hook had delivered up to id.
func (b *testBundle) startAt(url string, id int64) {
	b.journal.mu.Lock()
	defer b.journal.mu.Unlock()
	b.journal.cursors[CursorName(url)] = id
}

// received is one request a receiver got.
type received struct {
	n      int // 1-based count of requests
	header http.Header
	body   []byte
}

// eventID is the event id of the body.
func (r received) eventID(t *testing.T) int64 {
	t.Helper()
	var ev struct {
		ID int64 `json:"id"`
	}
	require.NoError(t, json.Unmarshal(r.body, &ev))
	return ev.ID
}

// receiver is a webhook endpoint on loopback. Respond decides the answer
// of the n-th request; by default it answers 204.
type receiver struct {
	srv *httptest.Server
	got chan received

	mu      sync.Mutex
	n       int
	respond func(n int, w http.ResponseWriter, r *http.Request)
}

func newReceiver(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	t.Helper()
	rc := &receiver{got: make(chan received, 1000), respond: respond}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		rc.mu.Lock()
		rc.n++
		n, respond := rc.n, rc.respond
		rc.mu.Unlock()
		rc.got <- received{n: n, header: r.Header.Clone(), body: body}
		if respond == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		respond(n, w, r)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) url() string { return rc.srv.URL + "/hook" }

func (rc *receiver) hook() Hook { return Hook{URL: rc.url(), Key: testKey, AllowPrivate: true} }

func (rc *receiver) setRespond(f func(n int, w http.ResponseWriter, r *http.Request)) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.respond = f
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.n
}

// next waits for the next request.
func (rc *receiver) next(t *testing.T) received {
	t.Helper()
	select {
	case r := <-rc.got:
		return r
	case <-time.After(waitTimeout):
		require.FailNow(t, "receiver got no request")
		return received{}
	}
}

// answer returns a respond function answering status to every request.
func answer(status int) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }
}

// hang returns a respond function that answers only when the request's
// context ends (the client gave up or the server closed).
func hang() func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, _ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
}

// loopbackResolver resolves every name to 127.0.0.1 (and no IPv6
// address), answering DNS over an in-memory pipe.
func loopbackResolver() *net.Resolver {
	return fakeResolver(netip.MustParseAddr("127.0.0.1"))
}

// fakeResolver resolves every name to addrs: A queries get the IPv4 ones,
// AAAA queries the IPv6 ones. It answers DNS over an in-memory pipe.
func fakeResolver(addrs ...netip.Addr) *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(context.Context, string, string) (net.Conn, error) {
			client, server := net.Pipe()
			go serveDNS(server, addrs)
			return client, nil
		},
	}
}

// serveDNS answers one DNS query over a stream: A and AAAA queries with
// the addrs of that family, others with no records.
func serveDNS(c net.Conn, addrs []netip.Addr) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(waitTimeout))
	var size [2]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return
	}
	q := make([]byte, binary.BigEndian.Uint16(size[:]))
	if _, err := io.ReadFull(c, q); err != nil || len(q) < 12 {
		return
	}
	i := 12 // the question's name: labels up to a zero byte
	for i < len(q) && q[i] != 0 {
		i += int(q[i]) + 1
	}
	if i+5 > len(q) {
		return
	}
	qtype := binary.BigEndian.Uint16(q[i+1:])
	// ID, flags (response, recursion desired and available, no error),
	// one question, answers, no authority or additional records.
	resp := []byte{q[0], q[1], 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0}
	resp = append(resp, q[12:i+5]...)
	for _, a := range addrs {
		if (qtype == 1 && a.Is4()) || (qtype == 28 && a.Is6()) { // A, AAAA
			resp[7]++
			// name (pointer to the question's), the type asked, class IN,
			// TTL 60, then the address.
			resp = append(resp, 0xc0, 12, byte(qtype>>8), byte(qtype), 0, 1, 0, 0, 0, 60, 0, byte(a.BitLen()/8))
			resp = append(resp, a.AsSlice()...)
		}
	}
	_, _ = c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(resp))), resp...))
}

// testLogger routes the log to the test's.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
