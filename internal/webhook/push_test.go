package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
)

// fakeSource pushes, for each event, what its function returns; calls
// records the event ids it was asked about.
type fakeSource struct {
	mu     sync.Mutex
	calls  []int64
	fail   int // fail this many more calls
	pushes func(ev *errand.Event) []*Push
	asked  chan int64
}

func (s *fakeSource) Pushes(_ context.Context, ev *errand.Event) ([]*Push, error) {
	s.mu.Lock()
	s.calls = append(s.calls, ev.ID)
	fail := s.fail > 0
	if fail {
		s.fail--
	}
	s.mu.Unlock()
	if s.asked != nil {
		s.asked <- ev.ID
	}
	if fail {
		return nil, errors.New("store unavailable")
	}
	return s.pushes(ev), nil
}

func (s *fakeSource) called() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// pushTo makes, for every event of type completed, one push to each url,
// each url its own queue.
func pushTo(urls ...string) func(ev *errand.Event) []*Push {
	return func(ev *errand.Event) []*Push {
		if ev.Type != errand.EventTaskCompleted {
			return nil
		}
		var out []*Push
		for _, u := range urls {
			out = append(out, &Push{
				Queue: u, URL: u, ID: fmt.Sprintf("%d.%s", ev.ID, u),
				Body:        []byte(fmt.Sprintf(`{"event":%d}`, ev.ID)),
				ContentType: "application/a2a+json",
				Header:      http.Header{"X-A2a-Notification-Token": {"tok"}},
				Key:         testKey,
			})
		}
		return out
	}
}

func (b *testBundle) pushConfig(t *testing.T, src PushSource) PushConfig {
	t.Helper()
	return PushConfig{
		Source:       src,
		Journal:      b.journal,
		AllowPrivate: true,
		Clock:        b.clock,
		Logger:       testLogger(t),
		OnAttemptFunc: func(url string, eventID int64, err error) {
			b.attempts <- attempt{url, eventID, err}
		},
		randFunc: func() float64 { return 0 },
	}
}

func (b *testBundle) startPush(t *testing.T, cfg PushConfig) (stop func()) {
	t.Helper()
	d, err := NewPush(cfg)
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

func (b *testBundle) pushFrom(id int64) {
	b.journal.mu.Lock()
	defer b.journal.mu.Unlock()
	b.journal.cursors[PushCursor] = id
}

func TestPushDeliversSignedWithHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	b.pushFrom(0)
	b.journal.add(errand.EventTaskCreated, errand.EventTaskCompleted, errand.EventTaskStep)
	src := &fakeSource{pushes: pushTo(rc.url())}
	stop := b.startPush(t, b.pushConfig(t, src))

	b.delivered(t, rc.url(), 2)
	got := rc.next(t)
	require.JSONEq(t, `{"event":2}`, string(got.body))
	require.Equal(t, "application/a2a+json", got.header.Get("Content-Type"))
	require.Equal(t, "tok", got.header.Get("X-A2A-Notification-Token"))
	require.Equal(t, UserAgent, got.header.Get("User-Agent"))
	require.Equal(t, "2."+rc.url(), got.header.Get(HeaderID))
	require.Equal(t, strconv.FormatInt(testStart.Unix(), 10), got.header.Get(HeaderTimestamp))
	require.NoError(t, Verify(testKey, got.header, got.body, b.clock.Now(), 0))
	b.journal.waitSent(t, 3)
	stop()
	require.Equal(t, []int64{1, 2, 3}, src.called(), "the source is asked about every event, in order")
	require.Equal(t, int64(3), b.journal.cursor(t, PushCursor))
	require.Equal(t, 1, rc.count())
}

func TestPushFirstRunStartsAtNewestEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	b.journal.add(errand.EventTaskCompleted, errand.EventTaskCompleted)
	src := &fakeSource{pushes: pushTo(rc.url())}
	b.startPush(t, b.pushConfig(t, src))
	select {
	case name := <-b.journal.written:
		require.Equal(t, PushCursor, name)
	case <-time.After(waitTimeout):
		require.FailNow(t, "the cursor was not saved")
	}
	b.journal.add(errand.EventTaskCompleted)
	b.delivered(t, rc.url(), 3)
	require.Equal(t, 1, rc.count())
	require.Equal(t, []int64{3}, src.called())
}

func TestPushQueueOrderAndIndependence(t *testing.T) {
	t.Parallel()
	b := setup(t)
	down := newReceiver(t, answer(http.StatusServiceUnavailable))
	up := newReceiver(t, nil)
	b.pushFrom(0)
	b.journal.add(errand.EventTaskCompleted, errand.EventTaskCompleted)
	src := &fakeSource{pushes: pushTo(down.url(), up.url())}
	cfg := b.pushConfig(t, src)
	stop := b.startPush(t, cfg)

	// The receiver that is up gets both pushes, in order, while the one
	// that is down still retries its first.
	seen := map[string][]attempt{}
	for len(seen[up.url()]) < 2 || len(seen[down.url()]) < 1 {
		a := b.nextAttempt(t)
		seen[a.hook] = append(seen[a.hook], a)
	}
	require.Equal(t, []attempt{{up.url(), 1, nil}, {up.url(), 2, nil}}, seen[up.url()])
	require.Equal(t, int64(1), seen[down.url()][0].eventID)
	require.Equal(t, []byte(`{"event":1}`), up.next(t).body)
	require.Equal(t, []byte(`{"event":2}`), up.next(t).body)
	// Its second push waits behind its first: one request so far.
	require.Equal(t, 1, down.count())
	stop()
	// The cursor stays before the event whose push is still owed.
	require.Equal(t, int64(0), b.journal.cursor(t, PushCursor))
}

func TestPushDroppedAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, answer(http.StatusInternalServerError))
	b.pushFrom(0)
	b.journal.add(errand.EventTaskCompleted, errand.EventTaskCompleted)
	src := &fakeSource{pushes: pushTo(rc.url())}
	cfg := b.pushConfig(t, src)
	cfg.MaxAttempts = 3
	cfg.BackoffBase, cfg.BackoffCap = time.Second, time.Minute
	b.startPush(t, cfg)

	for i, d := range []time.Duration{time.Second, 2 * time.Second} {
		a := b.nextAttempt(t)
		require.Equal(t, int64(1), a.eventID, "attempt %d", i+1)
		var se *StatusError
		require.ErrorAs(t, a.err, &se)
		b.clock.Advance(d)
	}
	// The third attempt is the last: the push is dropped and the next one
	// goes at once.
	last := b.nextAttempt(t)
	require.Equal(t, int64(1), last.eventID)
	require.Error(t, last.err)
	rc.setRespond(answer(http.StatusOK))
	b.delivered(t, rc.url(), 2)
	b.journal.waitCursor(t, PushCursor, 2, "the cursor passes the dropped push")
	require.Equal(t, 4, rc.count())
}

func TestPushSourceErrorIsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	b.pushFrom(0)
	b.journal.add(errand.EventTaskCompleted)
	src := &fakeSource{pushes: pushTo(rc.url()), fail: 1, asked: make(chan int64, 10)}
	b.startPush(t, b.pushConfig(t, src))
	require.Equal(t, int64(1), <-src.asked)
	b.waitForTimer(t, "(*pushRun).sleep") // the backoff
	b.clock.Advance(time.Second)
	require.Equal(t, int64(1), <-src.asked, "asked again about the same event")
	b.delivered(t, rc.url(), 1)
}

func TestPushPrivateAddressRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	b.pushFrom(0)
	b.journal.add(errand.EventTaskCompleted)
	cfg := b.pushConfig(t, &fakeSource{pushes: pushTo(rc.url())})
	cfg.AllowPrivate = false
	b.startPush(t, cfg)
	a := b.nextAttempt(t)
	require.ErrorIs(t, a.err, ErrPrivateAddress)
	require.Equal(t, 0, rc.count())
	b.journal.waitCursor(t, PushCursor, 1, "a refused push is dropped")
}

func TestPushRestartResumesFromCursor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	b.pushFrom(0)
	b.journal.add(errand.EventTaskCompleted)
	src := &fakeSource{pushes: pushTo(rc.url())}
	stop := b.startPush(t, b.pushConfig(t, src))
	b.delivered(t, rc.url(), 1)
	stop()
	require.Equal(t, int64(1), b.journal.cursor(t, PushCursor))

	b.journal.add(errand.EventTaskCompleted)
	b.startPush(t, b.pushConfig(t, src))
	b.delivered(t, rc.url(), 2)
	require.Equal(t, 2, rc.count(), "nothing sent twice")
}

func TestPushMaxPendingHoldsTheJournal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		<-release
		w.WriteHeader(http.StatusOK)
	})
	t.Cleanup(free) // before the receiver closes: it waits for its handlers
	b.pushFrom(0)
	b.journal.add(errand.EventTaskCompleted, errand.EventTaskCompleted)
	src := &fakeSource{pushes: pushTo(rc.url()), asked: make(chan int64, 10)}
	cfg := b.pushConfig(t, src)
	cfg.MaxPending = 1
	b.startPush(t, cfg)
	require.Equal(t, int64(1), <-src.asked)
	rc.next(t) // the push of event 1 is in flight
	select {
	case id := <-src.asked:
		require.FailNow(t, "read past MaxPending", "asked about event %d", id)
	default:
	}
	free()
	require.Equal(t, int64(2), <-src.asked)
	b.delivered(t, rc.url(), 1)
	b.delivered(t, rc.url(), 2)
}

func TestPushOneHolderOfTheLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	b.pushFrom(0)
	first := b.pushConfig(t, &fakeSource{pushes: pushTo(rc.url())})
	first.Owner = "a"
	b.startPush(t, first)
	require.True(t, b.journal.waitLead(t, "a").held)
	second := b.pushConfig(t, &fakeSource{pushes: pushTo(rc.url())})
	second.Owner = "b"
	b.startPush(t, second)
	require.False(t, b.journal.waitLead(t, "b").held)
	b.journal.add(errand.EventTaskCompleted)
	b.delivered(t, rc.url(), 1)
	require.Equal(t, 1, rc.count())
	require.Equal(t, "a", b.journal.holder(PushCursor))
}

func TestNewPushConfigChecked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	src := &fakeSource{pushes: pushTo()}
	for name, mutate := range map[string]func(c *PushConfig){
		"no source":         func(c *PushConfig) { c.Source = nil },
		"no journal":        func(c *PushConfig) { c.Journal = nil },
		"negative timeout":  func(c *PushConfig) { c.Timeout = -1 },
		"cap below base":    func(c *PushConfig) { c.BackoffBase, c.BackoffCap = time.Minute, time.Second },
		"negative attempts": func(c *PushConfig) { c.MaxAttempts = -1 },
		"negative pending":  func(c *PushConfig) { c.MaxPending = -1 },
		"short lease":       func(c *PushConfig) { c.LeaseTTL = time.Microsecond },
	} {
		cfg := b.pushConfig(t, src)
		mutate(&cfg)
		_, err := NewPush(cfg)
		require.Error(t, err, name)
	}
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	require.NoError(t, CheckURL("https://hooks.example.com/x", false))
	require.NoError(t, CheckURL("http://127.0.0.1:9/x", true))
	require.ErrorIs(t, CheckURL("http://127.0.0.1:9/x", false), ErrPrivateAddress)
	require.ErrorIs(t, CheckURL("http://localhost/x", false), ErrPrivateAddress)
	require.Error(t, CheckURL("ftp://hooks.example.com/x", true))
	require.Error(t, CheckURL("http:///x", true))
	require.Error(t, CheckURL("http://0x7f.1/x", true))
}

// A push the guard refuses when it connects (the receiver's name
// resolves to a loopback address) is dropped at once: the refusal is
// permanent, so it is reported and logged once and never tried again.
func TestPushRefusedAtConnectIsDroppedAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	_, port, err := net.SplitHostPort(strings.TrimPrefix(rc.srv.URL, "http://"))
	require.NoError(t, err)
	url := "http://hook.errand.test.:" + port + "/hook"
	b.pushFrom(0)
	b.journal.add(errand.EventTaskCompleted, errand.EventTaskCompleted)
	cfg := b.pushConfig(t, &fakeSource{pushes: pushTo(url)})
	cfg.AllowPrivate = false
	cfg.resolver = fakeResolver(netip.MustParseAddr("127.0.0.1"))
	logs := &recordLog{}
	cfg.Logger = slog.New(logs)
	b.startPush(t, cfg)

	// Each push is tried once, without a backoff between them: the clock
	// never moves.
	for _, id := range []int64{1, 2} {
		a := b.nextAttempt(t)
		require.Equal(t, id, a.eventID)
		require.ErrorIs(t, a.err, ErrPrivateAddress)
	}
	b.journal.waitCursor(t, PushCursor, 2, "the refused pushes are dropped")
	require.Equal(t, 0, rc.count())
	require.Empty(t, b.clock.timers(DefaultTimeout), "a backoff was armed")
	select {
	case a := <-b.attempts:
		t.Fatalf("tried again: %+v", a)
	default:
	}
	require.Equal(t, []string{"push dropped: its receiver's address is refused", "push dropped: its receiver's address is refused"}, logs.warnings())
}

// recordLog keeps the messages of the warnings and errors logged.
type recordLog struct {
	mu   sync.Mutex
	msgs []string
}

func (h *recordLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *recordLog) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	return nil
}
func (h *recordLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordLog) WithGroup(string) slog.Handler      { return h }

func (h *recordLog) warnings() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.msgs)
}
