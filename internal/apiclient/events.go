package apiclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/errandhq/errand/internal/api"
)

// Reconnection of event streams.
const (
	// DefaultReconnectWindow is how long Events keeps trying to reconnect
	// a dropped stream before it gives up.
	DefaultReconnectWindow = 30 * time.Second
	// maxEventBytes bounds one SSE message.
	maxEventBytes = 16 << 20
	minBackoff    = 100 * time.Millisecond
	maxBackoff    = 5 * time.Second
	// shortStream is how long a stream that delivered nothing must have
	// lasted for its reconnect to skip the backoff.
	shortStream = time.Second
)

// EventsPath is the stream of one task's events, which replays them from
// the start.
func EventsPath(taskID string) string { return taskPath(taskID, "events") }

// AllEventsPath is the stream of every event, live only; add ?after=0 to
// replay the journal from the start.
const AllEventsPath = "/api/events"

// Events follows the server-sent event stream at path (EventsPath,
// AllEventsPath) and yields each event, in journal order. A lastEventID
// above zero resumes after that event (the Last-Event-ID header).
//
// A task's stream also carries its live output: events of type
// DeltaEventType with ID 0, which are not journal events (DecodeDelta
// reads them). They never move the resume point, and after a reconnect the
// first delta of a call still under way holds its text so far again.
//
// When the stream drops (the daemon closed a slow stream, the connection
// broke, the daemon restarted) Events reconnects with Last-Event-ID set to
// the last id it yielded, and skips any event at or below it, so each event
// is yielded once. A stream that cannot be opened at all yields its error
// (an *Error or *UnreachableError) and ends; a reconnect that keeps failing
// yields the last error after ReconnectWindow. When ctx ends Events yields
// ctx.Err() and ends. Comment lines (": keepalive") are skipped.
func (c *Client) Events(ctx context.Context, path string, lastEventID int64) iter.Seq2[*api.Event, error] {
	return func(yield func(*api.Event, error) bool) {
		s := &stream{c: c, path: path, last: lastEventID}
		s.run(ctx, yield)
	}
}

// SetReconnectWindow sets how long Events keeps trying to reconnect a
// dropped stream: 0 means DefaultReconnectWindow, a negative value gives up
// at the first failed reconnect. Call it before using the client.
func (c *Client) SetReconnectWindow(d time.Duration) { c.reconnectWindow = d }

type stream struct {
	c    *Client
	path string
	last int64 // the last id yielded, or the caller's start
}

func (s *stream) run(ctx context.Context, yield func(*api.Event, error) bool) {
	window := s.c.reconnectWindow
	if window == 0 {
		window = DefaultReconnectWindow
	}
	var (
		connected    bool      // a stream was opened once
		failingSince time.Time // first failed reconnect of the current run of failures
		failures     int
		delay        time.Duration // before the next attempt
	)
	for {
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			yield(nil, ctx.Err())
			return
		}
		resp, err := s.open(ctx)
		if err != nil {
			if ctx.Err() != nil {
				yield(nil, ctx.Err())
				return
			}
			if !connected || !retryable(err) {
				yield(nil, err)
				return
			}
			if failures == 0 {
				failingSince = time.Now()
			}
			failures++
			if window < 0 || time.Since(failingSince) >= window {
				yield(nil, fmt.Errorf("reconnect event stream: %w", err))
				return
			}
			delay = backoff(failures)
			continue
		}
		connected, failures = true, 0
		opened := time.Now()
		n, stop, err := s.read(ctx, resp.Body, yield)
		resp.Body.Close()
		if stop {
			return
		}
		if ctx.Err() != nil {
			yield(nil, ctx.Err())
			return
		}
		if err != nil && !isStreamBreak(err) {
			yield(nil, err)
			return
		}
		// A stream that ended quickly without a message is retried after a
		// pause, so a server that closes at once is not hammered.
		delay = 0
		if n == 0 && time.Since(opened) < shortStream {
			delay = minBackoff
		}
	}
}

// open starts the stream after s.last.
func (s *stream) open(ctx context.Context) (*http.Response, error) {
	h := http.Header{}
	h.Set("Accept", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	path := s.path
	if s.last > 0 {
		id := strconv.FormatInt(s.last, 10)
		h.Set("Last-Event-ID", id)
		path = replaceAfter(path, id)
	}
	return s.c.send(ctx, http.MethodGet, path, nil, h)
}

// replaceAfter moves an ?after= in path to id, so that it agrees with
// Last-Event-ID on a reconnect.
func replaceAfter(path, id string) string {
	u, err := url.Parse(path)
	if err != nil {
		return path
	}
	q := u.Query()
	if !q.Has("after") {
		return path
	}
	q.Set("after", id)
	u.RawQuery = q.Encode()
	return u.String()
}

// read yields the events of one connection until it ends. It returns how
// many messages it saw, whether the consumer stopped, and why the stream
// ended (io.EOF when the server closed it).
func (s *stream) read(ctx context.Context, body io.Reader, yield func(*api.Event, error) bool) (n int, stop bool, err error) {
	br := bufio.NewReaderSize(body, 64<<10)
	var (
		data      strings.Builder
		hasData   bool
		eventType string
		idField   string
	)
	for {
		line, err := readLine(br)
		if err != nil {
			return n, false, err
		}
		if line == "" { // dispatch
			if !hasData {
				// An id-only message moves the resume point (the server
				// sends one as a stream opens).
				if id, err := strconv.ParseInt(idField, 10, 64); err == nil && id > s.last {
					s.last = id
				}
				eventType, idField = "", ""
				continue
			}
			n++
			ev := decodeEvent(idField, eventType, data.String())
			data.Reset()
			// A message's id is its own: one without (live output) is no
			// journal event and leaves the resume point where it was.
			hasData, eventType, idField = false, "", ""
			if ev.ID > 0 && ev.ID <= s.last {
				continue // seen before the reconnect
			}
			if ctx.Err() != nil {
				return n, false, ctx.Err()
			}
			if ev.ID > 0 {
				s.last = ev.ID
			}
			if !yield(ev, nil) {
				return n, true, nil
			}
			continue
		}
		if line[0] == ':' {
			continue // comment: keepalive
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
			if data.Len() > maxEventBytes {
				return n, false, errMessageTooLarge
			}
		case "event":
			eventType = value
		case "id":
			if !strings.ContainsRune(value, 0) {
				idField = value
			}
		}
	}
}

// readLine reads one line without its line ending.
func readLine(br *bufio.Reader) (string, error) {
	var sb strings.Builder
	for {
		chunk, err := br.ReadSlice('\n')
		sb.Write(chunk)
		if sb.Len() > maxEventBytes+1024 {
			return "", errMessageTooLarge
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return "", err // a partial last line is dropped, as the SSE spec says
		}
		line := strings.TrimSuffix(sb.String(), "\n")
		return strings.TrimSuffix(line, "\r"), nil
	}
}

// decodeEvent builds the event of one message: its data is an api.Event;
// id: and event: fill what the data leaves out. Data that is not an event
// is kept as the event's Data.
func decodeEvent(idField, eventType, data string) *api.Event {
	id, _ := strconv.ParseInt(idField, 10, 64)
	var ev api.Event
	if err := json.Unmarshal([]byte(data), &ev); err != nil || (ev.ID == 0 && ev.Type == "" && ev.TaskID == "") {
		ev = api.Event{}
		if json.Valid([]byte(data)) {
			ev.Data = json.RawMessage(data)
		} else {
			ev.Data, _ = json.Marshal(data)
		}
	}
	if ev.ID == 0 {
		ev.ID = id
	}
	if ev.Type == "" {
		ev.Type = eventType
	}
	return &ev
}

// DeltaEventType is the type of a piece of a task's live output.
const DeltaEventType = "task.output.delta"

// Delta is a piece of the text of one call of a step, as it streams in.
// Offset counts the characters (Unicode code points) of the call's text
// before Text: the call's text is its first Offset characters followed by
// Text. A delta at offset 0 for a call already under way holds the text so
// far (a client that joined mid-call, or reconnected).
type Delta struct {
	StepNo    int    `json:"step_no"`
	CallIndex int    `json:"call_index"`
	Offset    int    `json:"offset"`
	Text      string `json:"text"`
}

// DecodeDelta reads a live output event (type DeltaEventType, ID 0). The
// error names the field that is wrong.
func DecodeDelta(ev *api.Event) (*Delta, error) {
	switch {
	case ev.Type != DeltaEventType:
		return nil, fmt.Errorf("decode live output: type %q, want %s", ev.Type, DeltaEventType)
	case ev.ID != 0:
		return nil, fmt.Errorf("decode live output: id %d: live output has none", ev.ID)
	}
	var d Delta
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return nil, fmt.Errorf("decode live output: data: %w", err)
	}
	switch {
	case d.StepNo < 1:
		return nil, fmt.Errorf("decode live output: step_no %d: must be at least 1", d.StepNo)
	case d.CallIndex < 0:
		return nil, fmt.Errorf("decode live output: call_index %d: must not be negative", d.CallIndex)
	case d.Offset < 0:
		return nil, fmt.Errorf("decode live output: offset %d: must not be negative", d.Offset)
	}
	return &d, nil
}

// retryable reports whether a failed reconnect may succeed later: the
// daemon is down or restarting, not refusing us.
func retryable(err error) bool {
	var ue *UnreachableError
	if errors.As(err, &ue) {
		return true
	}
	var e *Error
	if errors.As(err, &e) {
		switch e.Status {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusTooManyRequests:
			return true
		}
	}
	return false
}

// errMessageTooLarge ends a stream whose message exceeds maxEventBytes.
var errMessageTooLarge = fmt.Errorf("read event stream: a message is larger than %d bytes", maxEventBytes)

// isStreamBreak reports whether a read error is the stream ending (closed
// by the server, or the connection broken) rather than bad content.
func isStreamBreak(err error) bool {
	return !errors.Is(err, errMessageTooLarge)
}

func backoff(failures int) time.Duration {
	d := minBackoff << min(failures-1, 10)
	return min(d, maxBackoff)
}
