package webhook

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/config"
)

func TestDeliverRetriesThenSucceeds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n <= 2 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	b.startAt(rc.url(), 0)
	events := b.journal.add(errand.EventTaskCompleted, errand.EventTaskFailed)
	cursor := CursorName(rc.url())
	b.start(t, b.config(t, rc.hook()))

	// Attempt 1 fails; the cursor stays; the retry is due in 1 s.
	first := rc.next(t)
	a := b.nextAttempt(t)
	require.Equal(t, int64(1), a.eventID)
	var se *StatusError
	require.ErrorAs(t, a.err, &se)
	require.Equal(t, http.StatusInternalServerError, se.StatusCode)
	require.Equal(t, int64(0), b.journal.cursor(t, cursor))
	require.Equal(t, []time.Duration{time.Second}, b.clock.timers(DefaultTimeout))

	b.clock.Advance(time.Second - time.Nanosecond)
	require.Equal(t, 1, rc.count(), "retried before the backoff")
	b.clock.Advance(time.Nanosecond)

	// Attempt 2 fails; the retry is due in 2 s.
	second := rc.next(t)
	a = b.nextAttempt(t)
	require.Equal(t, int64(1), a.eventID)
	require.Error(t, a.err)
	require.Equal(t, int64(0), b.journal.cursor(t, cursor))
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second}, b.clock.timers(DefaultTimeout))

	b.clock.Advance(2*time.Second - time.Nanosecond)
	require.Equal(t, 2, rc.count(), "retried before the backoff")
	b.clock.Advance(time.Nanosecond)

	// Attempt 3 succeeds and the cursor moves; event 2 goes at once.
	third := rc.next(t)
	b.delivered(t, rc.url(), 1)
	fourth := rc.next(t)
	b.delivered(t, rc.url(), 2)
	require.Equal(t, int64(2), b.journal.cursor(t, cursor))
	require.Equal(t, []int64{1, 2}, b.journal.writes(cursor))
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second}, b.clock.timers(DefaultTimeout))

	// Every attempt of event 1 has the same id and body, a fresh
	// timestamp and a valid signature; the body is the API's wire event.
	wantBody, err := json.Marshal(api.FromEvent(events[0]))
	require.NoError(t, err)
	for i, r := range []received{first, second, third} {
		require.Equal(t, "1", r.header.Get(HeaderID))
		require.JSONEq(t, string(wantBody), string(r.body))
		require.Equal(t, "application/json", r.header.Get("Content-Type"))
		require.Equal(t, UserAgent, r.header.Get("User-Agent"))
		wantTS := testStart.Add([]time.Duration{0, time.Second, 3 * time.Second}[i]).Unix()
		require.Equal(t, strconv.FormatInt(wantTS, 10), r.header.Get(HeaderTimestamp))
		require.NoError(t, Verify(testKey, r.header, r.body, b.clock.Now(), 0))
	}
	require.Equal(t, "2", fourth.header.Get(HeaderID))
	require.Equal(t, int64(2), fourth.eventID(t))
	require.NoError(t, Verify(testKey, fourth.header, fourth.body, b.clock.Now(), 0))
	require.ErrorIs(t, Verify([]byte("other"), fourth.header, fourth.body, b.clock.Now(), 0), ErrBadSignature)
}

func TestBackoffGrowsToCap(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, answer(http.StatusServiceUnavailable))
	b.startAt(rc.url(), 0)
	b.journal.add(errand.EventTaskCompleted)
	cfg := b.config(t, rc.hook())
	cfg.BackoffBase, cfg.BackoffCap = 7*time.Second, 30*time.Second
	b.start(t, cfg)

	want := []time.Duration{7 * time.Second, 14 * time.Second, 28 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, d := range want {
		require.Error(t, b.nextAttempt(t).err)
		require.Equal(t, want[:i+1], b.clock.timers(DefaultTimeout))
		b.clock.Advance(d)
	}
	require.Error(t, b.nextAttempt(t).err)
}

func TestBackoffDelay(t *testing.T) {
	t.Parallel()

	tests := []struct {
		attempt int
		r       float64
		want    time.Duration
	}{
		{1, 0, time.Second},
		{2, 0, 2 * time.Second},
		{9, 0, 256 * time.Second},
		{10, 0, 5 * time.Minute},
		{62, 0, 5 * time.Minute},
		{63, 0, 5 * time.Minute},
		{1000, 0, 5 * time.Minute},
		{1, 0.5, 750 * time.Millisecond},
		{3, 0.999, 2*time.Second + 2*time.Millisecond},
		{20, 0.5, 225 * time.Second},
	}
	for _, tt := range tests {
		got := backoffDelay(tt.attempt, time.Second, 5*time.Minute, tt.r)
		require.Equal(t, tt.want, got, "attempt %d, r %v", tt.attempt, tt.r)
	}
}

func TestRestartResendsNothingDelivered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(HeaderID) == "3" {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	cursor := CursorName(rc.url())
	b.startAt(rc.url(), 0)
	b.journal.add(errand.EventTaskCreated, errand.EventTaskStarted, errand.EventTaskCompleted)
	stop := b.start(t, b.config(t, rc.hook()))

	b.delivered(t, rc.url(), 1)
	b.delivered(t, rc.url(), 2)
	a := b.nextAttempt(t)
	require.Equal(t, int64(3), a.eventID)
	require.Error(t, a.err)
	stop()
	require.Equal(t, int64(2), b.journal.cursor(t, cursor))
	for range 3 {
		rc.next(t)
	}

	// While it was down, event 4 was written; the receiver is fixed.
	b.journal.add(errand.EventTaskFailed)
	rc.setRespond(answer(http.StatusOK))
	b.start(t, b.config(t, rc.hook()))
	b.delivered(t, rc.url(), 3)
	b.delivered(t, rc.url(), 4)
	require.Equal(t, int64(3), rc.next(t).eventID(t))
	require.Equal(t, int64(4), rc.next(t).eventID(t))
	require.Equal(t, int64(4), b.journal.cursor(t, cursor))
	require.Equal(t, 5, rc.count())
}

func TestNewHookStartsAtNewestEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	cursor := CursorName(rc.url())
	b.journal.add(errand.EventTaskCreated, errand.EventTaskCompleted, errand.EventTaskCompleted)
	b.start(t, b.config(t, rc.hook()))

	select {
	case name := <-b.journal.written:
		require.Equal(t, cursor, name)
	case <-time.After(waitTimeout):
		require.FailNow(t, "the new hook's cursor was not saved")
	}
	require.Equal(t, int64(3), b.journal.cursor(t, cursor))

	b.journal.add(errand.EventTaskCompleted)
	b.delivered(t, rc.url(), 4)
	require.Equal(t, int64(4), rc.next(t).eventID(t))
	require.Equal(t, 1, rc.count())
}

func TestFilteredEventsMoveTheCursor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	cursor := CursorName(rc.url())
	b.startAt(rc.url(), 0)
	b.journal.add(
		errand.EventTaskCreated,   // 1 skipped
		errand.EventTaskStarted,   // 2 skipped
		errand.EventTaskStep,      // 3 skipped: the third in a row saves the cursor
		errand.EventTaskCompleted, // 4 delivered, saved
		errand.EventTaskCreated,   // 5 skipped
		errand.EventTaskStarted,   // 6 skipped
		errand.EventTaskFailed,    // 7 delivered, saved
		errand.EventTaskCreated,   // 8 skipped, saved at shutdown
	)
	hook := rc.hook()
	hook.Events = []string{errand.EventTaskCompleted, errand.EventTaskFailed}
	cfg := b.config(t, hook)
	cfg.CursorEvery = 3
	stop := b.start(t, cfg)

	b.delivered(t, rc.url(), 4)
	b.delivered(t, rc.url(), 7)
	b.journal.waitSent(t, 8)
	stop()
	require.Equal(t, int64(4), rc.next(t).eventID(t))
	require.Equal(t, int64(7), rc.next(t).eventID(t))
	require.Equal(t, 2, rc.count())
	require.Equal(t, []int64{3, 4, 7, 8}, b.journal.writes(cursor))
}

func TestRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	target := newReceiver(t, nil)
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.url(), http.StatusTemporaryRedirect)
	})
	b.startAt(rc.url(), 0)
	b.journal.add(errand.EventTaskCompleted)
	b.start(t, b.config(t, rc.hook()))

	a := b.nextAttempt(t)
	var se *StatusError
	require.ErrorAs(t, a.err, &se)
	require.Equal(t, http.StatusTemporaryRedirect, se.StatusCode)
	require.ErrorContains(t, a.err, "redirects are not followed")
	require.Equal(t, 0, target.count())
	require.Equal(t, int64(0), b.journal.cursor(t, CursorName(rc.url())))
}

func TestTimeoutFailsTheAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	b.startAt(rc.url(), 0)
	b.journal.add(errand.EventTaskCompleted)
	cfg := b.config(t, rc.hook())
	cfg.Timeout = 3 * time.Second
	b.start(t, cfg)

	rc.next(t) // the first attempt hangs
	b.clock.Advance(3*time.Second - time.Nanosecond)
	b.clock.Advance(time.Nanosecond)
	a := b.nextAttempt(t)
	var te *TimeoutError
	require.ErrorAs(t, a.err, &te)
	require.Equal(t, 3*time.Second, te.Timeout)
	require.Equal(t, []time.Duration{3 * time.Second, time.Second}, b.clock.timers(0))

	b.clock.Advance(time.Second)
	b.delivered(t, rc.url(), 1)
	require.Equal(t, int64(1), b.journal.cursor(t, CursorName(rc.url())))
}

func TestConnectionErrorIsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A listener that hangs up on every connection.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepting := make(chan struct{})
	go func() {
		defer close(accepting)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-accepting
	})
	u := "http://" + l.Addr().String() + "/hook"
	b.startAt(u, 0)
	b.journal.add(errand.EventTaskCompleted)
	b.start(t, b.config(t, Hook{URL: u, AllowPrivate: true}))

	for range 2 {
		a := b.nextAttempt(t)
		require.Error(t, a.err)
		var ue *url.Error
		require.ErrorAs(t, a.err, &ue)
		b.clock.Advance(time.Hour)
	}
}

func TestSlowHookDoesNotDelayOthers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	slow := newReceiver(t, hang())
	down := newReceiver(t, answer(http.StatusInternalServerError))
	fast := newReceiver(t, nil)
	for _, rc := range []*receiver{slow, down, fast} {
		b.startAt(rc.url(), 0)
	}
	b.journal.add(errand.EventTaskCreated, errand.EventTaskCompleted, errand.EventTaskFailed)
	b.start(t, b.config(t, slow.hook(), down.hook(), fast.hook()))

	slow.next(t)
	down.next(t)
	for id := int64(1); id <= 3; id++ {
		require.Equal(t, id, fast.next(t).eventID(t))
	}
	delivered := 0
	for delivered < 3 {
		a := b.nextAttempt(t)
		switch a.hook {
		case fast.url():
			require.NoError(t, a.err)
			delivered++
		case down.url():
			require.Error(t, a.err)
		default:
			require.FailNow(t, "unexpected attempt", "%+v", a)
		}
	}
	require.Equal(t, int64(3), b.journal.cursor(t, CursorName(fast.url())))
	require.Equal(t, int64(0), b.journal.cursor(t, CursorName(slow.url())))
	require.Equal(t, int64(0), b.journal.cursor(t, CursorName(down.url())))
	require.Equal(t, 1, slow.count())
}

func TestFollowFailureIsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	b.startAt(rc.url(), 0)
	b.journal.followErrs = 2
	b.journal.add(errand.EventTaskCompleted)
	b.start(t, b.config(t, rc.hook()))

	for _, d := range []time.Duration{time.Second, 2 * time.Second} {
		b.waitForTimer(t, "(*deliverer).run") // the backoff
		require.Equal(t, d, b.clock.timers(DefaultTimeout)[len(b.clock.timers(DefaultTimeout))-1])
		b.clock.Advance(d)
	}
	b.delivered(t, rc.url(), 1)
}

func TestUnsignedHook(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	b.startAt(rc.url(), 0)
	b.journal.add(errand.EventTaskCompleted)
	b.start(t, b.config(t, Hook{URL: rc.url(), AllowPrivate: true}))

	b.delivered(t, rc.url(), 1)
	r := rc.next(t)
	require.Equal(t, "1", r.header.Get(HeaderID))
	require.NotEmpty(t, r.header.Get(HeaderTimestamp))
	require.Empty(t, r.header.Values(HeaderSignature))
}

func TestPrivateAddressRefusedAtConstruction(t *testing.T) {
	t.Parallel()

	refused := []string{
		"http://127.0.0.1:9/h",
		"http://127.1.2.3/",
		"http://[::1]:8080/",
		"http://localhost/",
		"https://LOCALHOST./x",
		"http://api.localhost/",
		"http://10.1.2.3/",
		"http://172.16.0.1/",
		"http://192.168.1.1/",
		"http://169.254.169.254/latest/meta-data",
		"http://0.0.0.0/",
		"http://[::]/",
		"http://[::ffff:127.0.0.1]/",
		"http://[fd00::1]/",
		"http://[fe80::1%25eth0]/",
		"http://224.0.0.1/",
		"http://100.64.0.1/",
		"http://255.255.255.255/",
	}
	for _, u := range refused {
		_, err := New(Config{Journal: newFakeJournal(), Hooks: []Hook{{URL: u}}})
		require.ErrorIs(t, err, ErrPrivateAddress, u)
		d, err := New(Config{Journal: newFakeJournal(), Hooks: []Hook{{URL: u, AllowPrivate: true}}})
		require.NoError(t, err, u)
		require.NotNil(t, d)
	}

	for _, u := range []string{"https://hooks.example.com/errand", "http://93.184.216.34:8080/h", "https://[2606:4700::1]/"} {
		_, err := New(Config{Journal: newFakeJournal(), Hooks: []Hook{{URL: u}}})
		require.NoError(t, err, u)
	}

	for _, u := range []string{"ftp://example.com/", "file:///etc/passwd", "http:///nohost", "example.com/hook", "http://bad host/"} {
		_, err := New(Config{Journal: newFakeJournal(), Hooks: []Hook{{URL: u, AllowPrivate: true}}})
		require.Error(t, err, u)
		require.NotErrorIs(t, err, ErrPrivateAddress, u)
	}
}

func TestPrivateAddressRefusedAtConnect(t *testing.T) {
	t.Parallel()

	// hook.errand.test resolves to 127.0.0.1, so New cannot tell; the
	// dialer refuses the address after resolution.
	for _, allow := range []bool{false, true} {
		t.Run("AllowPrivate="+strconv.FormatBool(allow), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			rc := newReceiver(t, nil)
			_, port, err := net.SplitHostPort(rc.srv.Listener.Addr().String())
			require.NoError(t, err)
			u := "http://hook.errand.test.:" + port + "/hook"
			b.startAt(u, 0)
			b.journal.add(errand.EventTaskCompleted)
			cfg := b.config(t, Hook{URL: u, Key: testKey, AllowPrivate: allow})
			cfg.resolver = loopbackResolver()
			b.start(t, cfg)

			a := b.nextAttempt(t)
			if allow {
				require.NoError(t, a.err)
				require.Equal(t, 1, rc.count())
				return
			}
			require.ErrorIs(t, a.err, ErrPrivateAddress)
			require.ErrorContains(t, a.err, "127.0.0.1:"+port)
			require.Equal(t, 0, rc.count())
		})
	}
}

func TestBlockedAddr(t *testing.T) {
	t.Parallel()

	for _, s := range []string{"127.0.0.1", "10.0.0.1", "172.31.255.255", "192.168.0.1", "169.254.1.1", "0.0.0.0", "0.1.2.3",
		"100.127.0.1", "224.1.1.1", "255.255.255.255", "::1", "::", "fc00::1", "fe80::1", "ff02::1", "::ffff:10.0.0.1", "fec0::1"} {
		require.True(t, blockedAddr(mustAddr(t, s)), s)
	}
	for _, s := range []string{"8.8.8.8", "93.184.216.34", "172.32.0.1", "100.128.0.1", "2606:4700::1", "::ffff:8.8.8.8"} {
		require.False(t, blockedAddr(mustAddr(t, s)), s)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()

	_, err := New(Config{})
	require.ErrorContains(t, err, "no journal")

	_, err = New(Config{Journal: newFakeJournal(), Hooks: []Hook{{URL: "https://a.example/"}, {URL: "https://a.example/"}}})
	require.ErrorContains(t, err, "listed twice")

	_, err = New(Config{Journal: newFakeJournal(), BackoffBase: time.Hour})
	require.ErrorContains(t, err, "below backoff base")

	d, err := New(Config{Journal: newFakeJournal()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, d.Run(ctx), "no hooks: Run returns when ctx ends")
}

func TestRunTwice(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	b.startAt(rc.url(), 0)
	b.journal.add(errand.EventTaskCompleted)
	d, err := New(b.config(t, rc.hook()))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	b.delivered(t, rc.url(), 1) // it runs

	require.ErrorContains(t, d.Run(ctx), "already running")
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(waitTimeout):
		require.FailNow(t, "Run did not return")
	}
}

func TestCursorName(t *testing.T) {
	t.Parallel()
	// printf '%s' https://hooks.example.com/errand | sha256sum | cut -c1-16
	require.Equal(t, "webhook:3ef6348699297e21", CursorName("https://hooks.example.com/errand"))
	require.NotEqual(t, CursorName("https://a.example/"), CursorName("https://b.example/"))
}

func TestHooksFromConfig(t *testing.T) {
	t.Parallel()

	env := map[string]string{"HOOK_SECRET": "whsec_c2VjcmV0", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	hooks, err := HooksFromConfig([]config.Webhook{
		{URL: "https://a.example/", Secret: "raw", Events: []string{errand.EventTaskCompleted}},
		{URL: "https://b.example/", SecretEnv: "HOOK_SECRET", AllowPrivate: true},
		{URL: "https://c.example/", Events: []string{"*"}},
	}, lookup)
	require.NoError(t, err)
	require.Equal(t, []Hook{
		{URL: "https://a.example/", Key: []byte("raw"), Events: []string{errand.EventTaskCompleted}},
		{URL: "https://b.example/", Key: []byte("secret"), AllowPrivate: true},
		{URL: "https://c.example/"},
	}, hooks)

	_, err = HooksFromConfig([]config.Webhook{{URL: "https://a.example/"}, {URL: "https://b.example/", SecretEnv: "MISSING"}}, lookup)
	require.ErrorContains(t, err, "webhooks[1].secret_env: environment variable MISSING is not set")
	_, err = HooksFromConfig([]config.Webhook{{URL: "https://b.example/", SecretEnv: "EMPTY"}}, lookup)
	require.ErrorContains(t, err, "EMPTY")
	_, err = HooksFromConfig([]config.Webhook{{URL: "https://b.example/", Secret: "whsec_!"}}, lookup)
	require.ErrorContains(t, err, "webhooks[0].secret: decode whsec_ secret")
	env["BAD"] = "whsec_"
	_, err = HooksFromConfig([]config.Webhook{{URL: "https://a.example/"}, {URL: "https://b.example/", SecretEnv: "BAD"}}, lookup)
	require.EqualError(t, err, "webhooks[1].secret_env: environment variable BAD: decode whsec_ secret: empty key")
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	require.NoError(t, err)
	return a
}
