package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/clock"
)

// StatusError is the error of an attempt the receiver answered with a
// status other than 2xx. Redirects (3xx) are not followed: they fail too.
type StatusError struct {
	StatusCode int
}

func (e *StatusError) Error() string {
	msg := "receiver answered " + strconv.Itoa(e.StatusCode)
	if text := http.StatusText(e.StatusCode); text != "" {
		msg += " " + text
	}
	if e.StatusCode >= 300 && e.StatusCode < 400 {
		msg += " (redirects are not followed)"
	}
	return msg
}

// TimeoutError is the error of an attempt that ran out of Config.Timeout.
type TimeoutError struct {
	Timeout time.Duration
}

func (e *TimeoutError) Error() string { return fmt.Sprintf("attempt timed out after %v", e.Timeout) }

// saveTimeout bounds the cursor write made at shutdown, after ctx ended.
const saveTimeout = 5 * time.Second

// maxDrain is how much of an answer's body is read, so the connection can
// be reused; the rest is dropped.
const maxDrain = 64 << 10

// deliverer runs one hook: it follows the journal from the hook's cursor
// and posts each wanted event until the receiver takes it.
type deliverer struct {
	cfg     *Config
	hook    Hook
	url     *url.URL
	client  *http.Client
	cursor  string
	wantAll bool
	log     *slog.Logger

	pos   int64 // id of the last event delivered or filtered out
	saved int64 // id last written to the cursor; -1 if unknown

	// traces traces deliveries; nil when traces are off.
	traces *deliveryTracer
}

func newDeliverer(cfg *Config, h Hook, u *url.URL, rt http.RoundTripper) *deliverer {
	h.Events = slices.Clone(h.Events)
	h.Key = slices.Clone(h.Key)
	d := &deliverer{
		cfg:  cfg,
		hook: h,
		url:  u,
		client: &http.Client{
			Transport:     rt,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		cursor:  CursorName(h.URL),
		wantAll: len(h.Events) == 0 || slices.Contains(h.Events, "*"),
		log:     cfg.Logger.With(slog.String("service", "webhook"), slog.String("hook", u.Redacted())),
		saved:   -1,
	}
	d.traces = newDeliveryTracer(cfg.TracerProvider, cfg.Journal, d.log)
	return d
}

func (h *deliverer) wants(typ string) bool {
	return h.wantAll || slices.Contains(h.hook.Events, typ)
}

// run delivers until ctx ends, then saves the cursor, unless ctx ended
// because the lease was lost: the cursor is the new holder's then.
func (h *deliverer) run(ctx context.Context) {
	if !h.load(ctx) {
		return
	}
	defer func() {
		if errors.Is(context.Cause(ctx), errLeaseLost) {
			return
		}
		saveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
		defer cancel()
		h.save(saveCtx)
	}()
	failures := 0
	for ctx.Err() == nil {
		events, err := h.cfg.Journal.Follow(ctx, h.pos)
		if err == nil {
			if h.consume(ctx, events) {
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
		delay := h.backoff(failures)
		h.log.WarnContext(ctx, "follow journal", slog.Int64("after_id", h.pos), slog.Any("error", err), slog.Duration("retry_in", delay))
		if !h.sleep(ctx, h.cfg.Clock.NewTimer(delay)) {
			return
		}
	}
}

// load reads the hook's cursor. A hook seen for the first time starts at
// the newest event, saved at once so a restart does not skip the events
// written meanwhile. It retries until it succeeds or ctx ends, and reports
// whether it succeeded.
func (h *deliverer) load(ctx context.Context) bool {
	for failures := 1; ; failures++ {
		err := h.loadOnce(ctx)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		delay := h.backoff(failures)
		h.log.WarnContext(ctx, "read webhook cursor", slog.String("cursor", h.cursor), slog.Any("error", err), slog.Duration("retry_in", delay))
		if !h.sleep(ctx, h.cfg.Clock.NewTimer(delay)) {
			return false
		}
	}
}

func (h *deliverer) loadOnce(ctx context.Context) error {
	id, found, err := h.cfg.Journal.Cursor(ctx, h.cursor)
	if err != nil {
		return fmt.Errorf("read cursor %s: %w", h.cursor, err)
	}
	if found {
		h.pos, h.saved = id, id
		return nil
	}
	if id, err = h.cfg.Journal.LastEventID(ctx); err != nil {
		return fmt.Errorf("read last event id: %w", err)
	}
	if err := h.cfg.Journal.SetCursor(ctx, h.cursor, id); err != nil {
		return fmt.Errorf("save cursor %s: %w", h.cursor, err)
	}
	h.pos, h.saved = id, id
	h.log.InfoContext(ctx, "new webhook starts at the newest event", slog.String("cursor", h.cursor), slog.Int64("event_id", id))
	return nil
}

// consume handles events until the channel closes or ctx ends, and
// reports whether it received any.
func (h *deliverer) consume(ctx context.Context, events <-chan *errand.Event) (got bool) {
	skipped := 0
	for {
		var ev *errand.Event
		select {
		case <-ctx.Done():
			return got
		case e, ok := <-events:
			if !ok {
				return got
			}
			ev = e
		}
		got = true
		if ev.ID <= h.pos {
			continue // seen before a re-follow
		}
		if !h.wants(ev.Type) {
			h.pos = ev.ID
			if skipped++; skipped >= h.cfg.CursorEvery {
				h.save(ctx)
				skipped = 0
			}
			continue
		}
		if !h.deliver(ctx, ev) {
			return got
		}
		skipped = 0
	}
}

// deliver posts ev until the receiver takes it, then moves and saves the
// cursor. It reports false if ctx ended first.
func (h *deliverer) deliver(ctx context.Context, ev *errand.Event) bool {
	body, err := json.Marshal(api.FromEvent(ev))
	if err != nil {
		// Only invalid JSON in the event's data gets here; retrying cannot
		// help, and it must not hold back the events after it.
		h.log.ErrorContext(ctx, "encode event: skipped", slog.Int64("event_id", ev.ID), slog.Any("error", err))
		h.pos = ev.ID
		h.save(ctx)
		h.notify(ev.ID, fmt.Errorf("encode event %d: %w", ev.ID, err))
		return true
	}
	id := strconv.FormatInt(ev.ID, 10)
	traced := h.traces.runContext(ctx, ev.TaskID)
	for attempt := 1; ; attempt++ {
		var err error
		if traced == nil {
			err = h.post(ctx, id, body, nil)
		} else {
			span, header := h.traces.start(traced, spanPrefix+ev.Type, nil, h.attemptAttrs(ev, attempt)...)
			err = h.post(ctx, id, body, header)
			endAttempt(span, err)
		}
		if err == nil {
			h.pos = ev.ID
			h.save(ctx)
			h.log.DebugContext(ctx, "delivered", slog.Int64("event_id", ev.ID), slog.Int("attempt", attempt))
			h.notify(ev.ID, nil)
			return true
		}
		if ctx.Err() != nil {
			return false // shutting down: sent again after a restart
		}
		delay := h.backoff(attempt)
		// Arm the timer before reporting, so whoever hears of the failure
		// finds the retry already scheduled.
		timer := h.cfg.Clock.NewTimer(delay)
		attrs := []any{slog.Int64("event_id", ev.ID), slog.Int("attempt", attempt), slog.Duration("retry_in", delay)}
		if se := (*StatusError)(nil); errors.As(err, &se) {
			attrs = append(attrs, slog.Int("status", se.StatusCode))
		}
		h.log.WarnContext(ctx, "webhook delivery failed", append(attrs, slog.Any("error", err))...)
		h.notify(ev.ID, err)
		if !h.sleep(ctx, timer) {
			return false
		}
	}
}

// post makes one attempt, with header added (nil: none), and returns nil
// for a 2xx answer.
func (h *deliverer) post(ctx context.Context, id string, body []byte, header http.Header) error {
	return postOnce(ctx, h.client, h.cfg.Clock, h.cfg.Timeout, &outgoing{
		url: h.url.String(), id: id, body: body, contentType: "application/json", key: h.hook.Key, header: header,
	})
}

// outgoing is one POST: a webhook delivery or an A2A push.
type outgoing struct {
	url         string
	id          string // webhook-id: the same on every attempt
	body        []byte
	contentType string
	header      http.Header // added to the request
	key         []byte      // signs it; empty: unsigned
}

// postOnce makes one attempt, bounded by timeout on clock, and returns nil
// for a 2xx answer.
func postOnce(ctx context.Context, client *http.Client, clk clock.Clock, timeout time.Duration, o *outgoing) error {
	ctx, cancel := context.WithCancelCause(ctx)
	timer := clk.NewTimer(timeout)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-timer.C():
			cancel(&TimeoutError{Timeout: timeout})
		case <-ctx.Done():
		}
	}()
	defer func() {
		timer.Stop()
		cancel(nil)
		<-watched
	}()

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.url, bytes.NewReader(o.body))
	if err != nil {
		return fmt.Errorf("new request: %w", err)
	}
	for name, values := range o.header {
		req.Header[name] = slices.Clone(values)
	}
	now := clk.Now()
	req.Header.Set("Content-Type", o.contentType)
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set(HeaderID, o.id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	if len(o.key) > 0 {
		req.Header.Set(HeaderSignature, Sign(o.key, o.id, now, o.body))
	}
	resp, err := client.Do(req)
	if err != nil {
		if te := (*TimeoutError)(nil); errors.As(context.Cause(ctx), &te) {
			return te
		}
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &StatusError{StatusCode: resp.StatusCode}
	}
	return nil
}

// save writes the cursor if it moved. A failure is logged and the write
// tried again at the next save: until then a restart may send again
// events that were delivered.
func (h *deliverer) save(ctx context.Context) {
	if h.pos == h.saved {
		return
	}
	if err := h.cfg.Journal.SetCursor(ctx, h.cursor, h.pos); err != nil {
		h.log.WarnContext(ctx, "save webhook cursor", slog.String("cursor", h.cursor), slog.Int64("event_id", h.pos), slog.Any("error", err))
		return
	}
	h.saved = h.pos
}

func (h *deliverer) notify(eventID int64, err error) {
	if h.cfg.OnAttemptFunc != nil {
		h.cfg.OnAttemptFunc(h.hook.URL, eventID, err)
	}
}

func (h *deliverer) backoff(attempt int) time.Duration {
	return backoffDelay(attempt, h.cfg.BackoffBase, h.cfg.BackoffCap, h.cfg.randFunc())
}

// sleep waits for timer or ctx, and reports false if ctx ended first.
func (h *deliverer) sleep(ctx context.Context, timer clock.Timer) bool {
	select {
	case <-timer.C():
		return true
	case <-ctx.Done():
		timer.Stop()
		return false
	}
}
