package provider

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxRetryAfter bounds the wait a server's Retry-After may ask for: a
// longer one (or a date far off) is cut to it, so that a confused server
// cannot park a task for days.
const MaxRetryAfter = 10 * time.Minute

// ParseRetryAfter reads a Retry-After header value, delay-seconds or an
// HTTP date, as a wait from now. An absent, malformed or past value is 0
// (the server named no wait); a longer wait than MaxRetryAfter is
// MaxRetryAfter.
func ParseRetryAfter(value string, now time.Time) time.Duration {
	v := strings.TrimSpace(value)
	if v == "" {
		return 0
	}
	if isDigits(v) {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs > int64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter // only a number too large fails to parse
		}
		return time.Duration(secs) * time.Second
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	return min(max(at.Sub(now), 0), MaxRetryAfter)
}

// retryAfterOf is the wait a failed reply asks for: its Retry-After, an
// HTTP date read against the reply's own Date when it has one, so that a
// clock set wrong on either side does not stretch the wait.
func retryAfterOf(h http.Header) time.Duration {
	now := time.Now()
	if d, err := http.ParseTime(h.Get("Date")); err == nil {
		now = d
	}
	return ParseRetryAfter(h.Get("Retry-After"), now)
}

func isDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// RateLimitStatus reports whether an HTTP status is a server holding
// calls off for a while: 429 (too many requests), 503 (unavailable) or
// 529 (Anthropic's "overloaded").
func RateLimitStatus(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable || code == 529
}

// RateLimit returns err's *Error when it is a server holding calls off
// (see RateLimitStatus, or the same said in a stream's error event): such
// a call is waited for, RetryAfter or a backoff, rather than counted as a
// failed attempt. A 429 that says the account's quota is used up
// (OpenAI's insufficient_quota) is not one: no wait ends it.
func RateLimit(err error) (*Error, bool) {
	pe, ok := errors.AsType[*Error](err)
	if !ok || pe.quota || !(RateLimitStatus(pe.StatusCode) || pe.limited) {
		return nil, false
	}
	return pe, true
}

// quotaExhausted reports whether an error body says the account has run
// out of credit ({"error": {"code" or "type": "insufficient_quota"}}).
func quotaExhausted(raw []byte) bool {
	var body struct {
		Error struct {
			Code any    `json:"code"`
			Type string `json:"type"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &body); decodeFailed(err) {
		return false
	}
	return body.Error.Code == "insufficient_quota" || body.Error.Type == "insufficient_quota"
}
