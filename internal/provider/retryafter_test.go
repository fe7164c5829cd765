package provider

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	for _, tt := range []struct {
		name, value string
		want        time.Duration
	}{
		{"absent", "", 0},
		{"seconds", "2", 2 * time.Second},
		{"zero", "0", 0},
		{"spaces around", "  30 ", 30 * time.Second},
		{"leading zeros", "007", 7 * time.Second},
		{"at the bound", "600", MaxRetryAfter},
		{"beyond the bound", "601", MaxRetryAfter},
		{"huge", "99999999999999999999999999", MaxRetryAfter},
		{"negative", "-5", 0},
		{"fraction", "1.5", 0},
		{"unit", "5s", 0},
		{"garbage", "soon, please", 0},
		{"date", now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{"date in RFC 850", now.Add(time.Minute).Format("Monday, 02-Jan-06 15:04:05 GMT"), time.Minute},
		{"date in asctime", now.Add(time.Minute).Format(time.ANSIC), time.Minute},
		{"date past", now.Add(-time.Hour).Format(http.TimeFormat), 0},
		{"date far off", now.Add(72 * time.Hour).Format(http.TimeFormat), MaxRetryAfter},
		{"date not GMT", now.Add(time.Minute).Format(time.RFC1123Z), 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, ParseRetryAfter(tt.value, now))
		})
	}
}

// A 429 or 503 carries the wait its Retry-After asked for, a date read
// against the reply's own Date; either is a rate limit, with or without a
// Retry-After, and a 500 is not.
func TestStatusErrorRetryAfter(t *testing.T) {
	t.Parallel()
	serverNow := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC) // far from this machine's clock
	for _, tt := range []struct {
		name       string
		status     int
		header     http.Header
		wait       time.Duration
		rateLimits bool
	}{
		{"429 seconds", 429, http.Header{"Retry-After": {"2"}}, 2 * time.Second, true},
		{"503 date", 503, http.Header{"Retry-After": {serverNow.Add(45 * time.Second).Format(http.TimeFormat)},
			"Date": {serverNow.Format(http.TimeFormat)}}, 45 * time.Second, true},
		{"503 none", 503, nil, 0, true},
		{"529 garbage", 529, http.Header{"Retry-After": {"later"}}, 0, true},
		{"500", 500, http.Header{"Retry-After": {"3"}}, 3 * time.Second, false},
		{"400", 400, nil, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				for k, v := range tt.header {
					w.Header()[k] = v
				}
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, `{"error":{"message":"slow down"}}`)
			}))
			t.Cleanup(srv.Close)
			for _, p := range []Provider{
				NewOpenAI(OpenAIConfig{BaseURL: srv.URL, HTTPClient: srv.Client()}),
				NewAnthropic(AnthropicConfig{BaseURL: srv.URL, HTTPClient: srv.Client()}),
			} {
				_, err := p.Complete(context.Background(), &Request{Model: "m", Messages: []Message{{Role: RoleUser, Content: "x"}}})
				pe, ok := RateLimit(err)
				require.Equal(t, tt.rateLimits, ok, "%v", err)
				if !ok {
					pe = requireStatusError(t, err)
				}
				require.Equal(t, tt.status, pe.StatusCode)
				require.Equal(t, tt.wait, pe.RetryAfter)
			}
		})
	}
}

func requireStatusError(t *testing.T, err error) *Error {
	t.Helper()
	var pe *Error
	require.ErrorAs(t, err, &pe)
	return pe
}

// An overloaded or rate-limit error event in a stream is a rate limit as
// its HTTP status would be; another error event is not.
func TestStreamErrorEventRateLimit(t *testing.T) {
	t.Parallel()
	for errType, want := range map[string]bool{"overloaded_error": true, "rate_limit_error": true, "api_error": false} {
		stream := anthropicSSE(
			"message_start", `{"type":"message_start","message":{"model":"claude-test","usage":{"input_tokens":3,"output_tokens":1}}}`,
			"error", `{"type":"error","error":{"type":"`+errType+`","message":"busy"}}`,
		)
		b := setupAnthropic(t, AnthropicConfig{}, serveAnthropicFixture(anthropicReplyFixture{SSE: stream}))
		_, err := b.client.Complete(context.Background(), &Request{Messages: []Message{{Role: RoleUser, Content: "x"}}, OnText: func(string) {}})
		_, ok := RateLimit(err)
		require.Equal(t, want, ok, errType)
	}
	_, ok := RateLimit(context.Canceled)
	require.False(t, ok)
}

// FuzzParseRetryAfter: any header value gives a wait in [0,
// MaxRetryAfter], and a count of seconds within it gives exactly that.
func FuzzParseRetryAfter(f *testing.F) {
	for _, seed := range []string{"", "2", "600", "601", "99999999999999999999", "-1", "1.5", "Wed, 21 Oct 2015 07:28:00 GMT", "garbage"} {
		f.Add(seed)
	}
	now := time.Date(2015, 10, 21, 7, 20, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, value string) {
		got := ParseRetryAfter(value, now)
		if got < 0 || got > MaxRetryAfter {
			t.Fatalf("ParseRetryAfter(%q) = %v, outside [0, %v]", value, got, MaxRetryAfter)
		}
		if n, err := strconv.Atoi(value); err == nil && isDigits(value) && n <= int(MaxRetryAfter/time.Second) {
			if got != time.Duration(n)*time.Second {
				t.Fatalf("ParseRetryAfter(%q) = %v, want %ds", value, got, n)
			}
		}
	})
}

// A 429 that says the quota is used up is no rate limit: waiting would
// not end it.
func TestQuotaExhaustedIsNoRateLimit(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]bool{
		`{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`: false,
		`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`:                       true,
		`{"error":"slow down"}`: true,
		`not json`:              true,
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, body)
		}))
		t.Cleanup(srv.Close)
		p := NewOpenAI(OpenAIConfig{BaseURL: srv.URL, HTTPClient: srv.Client()})
		_, err := p.Complete(context.Background(), &Request{Model: "m", Messages: []Message{{Role: RoleUser, Content: "x"}}})
		_, ok := RateLimit(err)
		require.Equal(t, want, ok, body)
	}
}
