package webhook

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/config"
)

// Defaults of Config.
const (
	// DefaultTimeout bounds one delivery attempt.
	DefaultTimeout = 10 * time.Second
	// DefaultBackoffBase is the delay before the first retry.
	DefaultBackoffBase = time.Second
	// DefaultBackoffCap is the longest delay between two attempts.
	DefaultBackoffCap = 5 * time.Minute
	// DefaultCursorEvery is how many filtered-out events a hook passes
	// before it writes its cursor.
	DefaultCursorEvery = 100
	// DefaultLeaseTTL is how long a hook's lease lasts unless renewed.
	DefaultLeaseTTL = 5 * time.Second
)

// UserAgent is the User-Agent of every delivery.
const UserAgent = "errand-webhook"

// CursorPrefix starts the name of every webhook cursor (see CursorName).
const CursorPrefix = "webhook:"

// Journal is where a Dispatcher reads events and keeps its cursors and
// leases. The daemon implements it over the store.
type Journal interface {
	// Follow sends the events with id > afterID, in id order, then new ones
	// as they are written, until ctx ends; the channel is closed then. A
	// channel closed earlier (the journal failed) is followed again after a
	// backoff.
	Follow(ctx context.Context, afterID int64) (<-chan *errand.Event, error)
	// Cursor returns the event id saved under name; found is false if none
	// was ever saved.
	Cursor(ctx context.Context, name string) (eventID int64, found bool, err error)
	// SetCursor durably saves eventID under name.
	SetCursor(ctx context.Context, name string, eventID int64) error
	// LastEventID returns the id of the newest event, 0 if there is none.
	LastEventID(ctx context.Context) (int64, error)
	// Lead takes the lease name for owner until ttl from now if no other
	// owner holds it (renewing it if owner does), atomically across every
	// process sharing the journal; held reports whether owner holds it.
	Lead(ctx context.Context, name, owner string, ttl time.Duration) (held bool, err error)
	// Unlead releases the lease name if owner holds it, and does nothing
	// otherwise.
	Unlead(ctx context.Context, name, owner string) error
}

// Hook is one receiver.
type Hook struct {
	// URL receives the POSTs; http or https.
	URL string
	// Key signs the deliveries (see Key and Sign). Empty sends them
	// unsigned, without a webhook-signature header.
	Key []byte
	// Events are the event types delivered; empty (or containing "*")
	// delivers every event.
	Events []string
	// AllowPrivate allows loopback, private, link-local and other
	// non-public addresses (see ErrPrivateAddress); for tests and LANs.
	AllowPrivate bool
}

// Config configures a Dispatcher.
type Config struct {
	// Hooks are the receivers; each URL at most once.
	Hooks []Hook
	// Journal is the source of events and the keeper of cursors; required.
	Journal Journal
	// Clock times attempts, backoffs and webhook-timestamp; default the
	// real clock.
	Clock clock.Clock
	// Logger reports failed attempts; default slog.Default().
	Logger *slog.Logger
	// Timeout bounds one attempt, from connecting to reading the answer;
	// default DefaultTimeout. An attempt that runs out fails and is retried.
	Timeout time.Duration
	// BackoffBase is the delay after the first failed attempt of an event;
	// it doubles after each further failure up to BackoffCap. Each delay
	// is cut by a random jitter of up to half. Defaults DefaultBackoffBase
	// and DefaultBackoffCap.
	BackoffBase, BackoffCap time.Duration
	// CursorEvery is how many events a hook filters out in a row before it
	// saves its cursor; default DefaultCursorEvery.
	CursorEvery int
	// Owner names this Dispatcher on the hooks' leases (see the package
	// documentation); default the host name, the pid and a random number,
	// unique to the Dispatcher. Dispatchers sharing a journal need
	// distinct owners.
	Owner string
	// LeaseTTL is how long a hook's lease lasts unless renewed; default
	// DefaultLeaseTTL, at least a millisecond. The holder renews it every
	// LeaseTTL/3; when it dies, another Dispatcher takes the hook over
	// within LeaseTTL and a third.
	LeaseTTL time.Duration
	// OnAttemptFunc, if set, is called after every attempt with the hook's
	// URL, the event id and nil if the event was delivered (and the cursor
	// saved) or the attempt's error. It runs on the hook's goroutine and
	// must not block.
	OnAttemptFunc func(hook string, eventID int64, err error)
	// TracerProvider, when set and the Journal is a TaskReader (as
	// ClientJournal is), traces each attempt to deliver a task's event as
	// a client span "webhook TYPE" in the trace of the task's run, next
	// to the task's attempts, and sends its W3C traceparent header, so
	// the receiver's spans join that trace. Nil, the default, sends
	// neither: the cost is a nil check.
	TracerProvider trace.TracerProvider
	// Transport, if set, carries every request instead of each hook's own
	// guarded transport. For tests only: it bypasses the connect-time
	// private address check.
	Transport http.RoundTripper

	// resolver replaces net.DefaultResolver in the guarded transports.
	resolver *net.Resolver
	// randFunc returns the jitter fraction in [0, 1); default rand.Float64.
	randFunc func() float64
}

func (c *Config) withDefaults() *Config {
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

func (c *Config) validate() error {
	switch {
	case c.Journal == nil:
		return errors.New("no journal")
	case c.Timeout < 0:
		return fmt.Errorf("timeout %v is negative", c.Timeout)
	case c.BackoffBase < 0:
		return fmt.Errorf("backoff base %v is negative", c.BackoffBase)
	case c.BackoffCap < c.BackoffBase:
		return fmt.Errorf("backoff cap %v is below backoff base %v", c.BackoffCap, c.BackoffBase)
	case c.CursorEvery < 0:
		return fmt.Errorf("cursor every %d is negative", c.CursorEvery)
	case c.LeaseTTL < time.Millisecond:
		return fmt.Errorf("lease ttl %v is below 1ms", c.LeaseTTL)
	}
	return nil
}

// Dispatcher delivers journal events to webhooks: one goroutine per hook,
// each with its own durable cursor, so a receiver that is down holds back
// only its own queue, and delivering only while it holds the hook's lease,
// so that of the Dispatchers sharing a journal one delivers each hook. See
// the package documentation for the guarantees.
type Dispatcher struct {
	cfg        *Config
	deliverers []*deliverer
	transports []*http.Transport // owned, closed when Run ends

	mu      sync.Mutex
	running bool
}

// New checks cfg and the hooks' URLs and returns a Dispatcher; Run starts
// it. A URL that is not http(s), or (without AllowPrivate) names localhost
// or a literal non-public address, is an error; the latter wraps
// ErrPrivateAddress.
func New(cfg Config) (*Dispatcher, error) {
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("webhook config: %w", err)
	}
	d := &Dispatcher{cfg: c}
	seen := make(map[string]bool, len(c.Hooks))
	for i, h := range c.Hooks {
		u, err := checkURL(h.URL, h.AllowPrivate)
		if err != nil {
			return nil, fmt.Errorf("webhook %d: %w", i, err)
		}
		if seen[h.URL] {
			return nil, fmt.Errorf("webhook %d: url %s: listed twice", i, u.Redacted())
		}
		seen[h.URL] = true
		rt := c.Transport
		if rt == nil {
			t := newTransport(h.AllowPrivate, c.resolver)
			d.transports = append(d.transports, t)
			rt = t
		}
		d.deliverers = append(d.deliverers, newDeliverer(c, h, u, rt))
	}
	return d, nil
}

// Run delivers events until ctx ends, then waits for every hook's
// goroutine to stop (an attempt in flight is abandoned and will be sent
// again by whoever delivers next), saves the cursors, releases the leases
// and returns nil. It returns an error at once if the Dispatcher is
// already running.
func (d *Dispatcher) Run(ctx context.Context) error {
	d.mu.Lock()
	if d.running {
		d.mu.Unlock()
		return errors.New("webhook dispatcher: already running")
	}
	d.running = true
	d.mu.Unlock()
	defer func() {
		for _, t := range d.transports {
			t.CloseIdleConnections()
		}
		d.mu.Lock()
		d.running = false
		d.mu.Unlock()
	}()

	var wg sync.WaitGroup
	for _, h := range d.deliverers {
		wg.Go(func() { h.lead(ctx) })
	}
	wg.Wait()
	return nil
}

// CursorName is the name of the cursor that remembers how far the hook
// with this URL got: CursorPrefix then the first 16 hex digits of the
// SHA-256 of the URL exactly as configured. Changing a hook's URL gives it
// a new cursor, which starts at the newest event.
func CursorName(url string) string {
	sum := sha256.Sum256([]byte(url))
	return CursorPrefix + hex.EncodeToString(sum[:8])
}

// HooksFromConfig turns the webhooks of errand.yaml into Hooks, reading a
// secret_env secret through lookup (os.LookupEnv if nil). An unset or empty
// variable, or a whsec_ secret that is not base64 or has an empty key, is
// an error naming the webhook's key and, for secret_env, the variable.
func HooksFromConfig(ws []config.Webhook, lookup func(string) (string, bool)) ([]Hook, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	hooks := make([]Hook, 0, len(ws))
	for i, w := range ws {
		secret, from := w.Secret, fmt.Sprintf("webhooks[%d].secret", i)
		if w.SecretEnv != "" {
			v, ok := lookup(w.SecretEnv)
			if !ok || v == "" {
				return nil, fmt.Errorf("webhooks[%d].secret_env: environment variable %s is not set", i, w.SecretEnv)
			}
			secret, from = v, fmt.Sprintf("webhooks[%d].secret_env: environment variable %s", i, w.SecretEnv)
		}
		var key []byte
		if secret != "" {
			var err error
			if key, err = Key(secret); err != nil {
				return nil, fmt.Errorf("%s: %w", from, err)
			}
		}
		events := slices.Clone(w.Events)
		if slices.Contains(events, "*") {
			events = nil
		}
		hooks = append(hooks, Hook{URL: w.URL, Key: key, Events: events, AllowPrivate: w.AllowPrivate})
	}
	return hooks, nil
}

// backoffDelay is the wait after the attempt-th failed attempt (1-based):
// base·2^(attempt-1), at most max, less a jitter of r/2 of it (r in [0, 1)).
func backoffDelay(attempt int, base, maxDelay time.Duration, r float64) time.Duration {
	d := maxDelay
	if attempt < 63 {
		if e := base << (attempt - 1); e > 0 && e>>(attempt-1) == base && e < maxDelay {
			d = e
		}
	}
	return d - time.Duration(float64(d)*r/2)
}
