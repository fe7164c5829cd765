package providertest

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// rateLimit is a sliding-window limit on the requests a Server answers
// (see Server.LimitRate). Its fields are guarded by the Server's mu.
type rateLimit struct {
	n      int // 0: no limit
	window time.Duration
	now    func() time.Time
	// answered are the times of the requests let through within the
	// window, oldest first.
	answered []time.Time
	refused  int
	peak     int // the most let through within one window
}

// LimitRate makes the server answer at most n requests in any window, as
// a provider's requests-per-minute limit does: a request beyond it is
// answered 429 with a Retry-After of the whole seconds (at least 1) until
// the oldest answered request leaves the window, and takes no reply from
// the script. now is the clock the window is measured by: a test's fake
// clock, so that no one sleeps; nil is time.Now.
func (s *Server) LimitRate(n int, window time.Duration, now func() time.Time) {
	if now == nil {
		now = time.Now
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit = rateLimit{n: n, window: window, now: now}
}

// Refused is how many requests LimitRate answered 429.
func (s *Server) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limit.refused
}

// PeakRate is the most requests let through within one window of
// LimitRate: never more than its n.
func (s *Server) PeakRate() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limit.peak
}

// refuse lets a request through, counting it, or says how long until one
// would be let through.
func (l *rateLimit) refuse() (wait time.Duration, refused bool) {
	if l.n <= 0 {
		return 0, false
	}
	now := l.now()
	for len(l.answered) > 0 && !now.Before(l.answered[0].Add(l.window)) {
		l.answered = l.answered[1:]
	}
	if len(l.answered) >= l.n {
		l.refused++
		return l.answered[0].Add(l.window).Sub(now), true
	}
	l.answered = append(l.answered, now)
	l.peak = max(l.peak, len(l.answered))
	return 0, false
}

func writeRateLimited(w http.ResponseWriter, wait time.Duration) {
	secs := max(1, int64((wait+time.Second-1)/time.Second))
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	writeError(w, http.StatusTooManyRequests, fmt.Sprintf("providertest: rate limit reached, retry in %ds", secs))
}
