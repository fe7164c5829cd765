package server

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/errandhq/errand/internal/version"
)

// health caches the last store check of /healthz.
type health struct {
	mu      sync.Mutex
	checked time.Time
	err     error
}

// healthz answers ok only while the server is not stopping and the store
// can take a write: a process that is up over a read-only or vanished store
// is not one to send work to.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	select {
	case <-s.streams.done: // shutting down: send traffic elsewhere
		s.writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "stopping", "version": version.String()})
		return
	default:
	}
	if err := s.checkStore(r.Context()); err != nil {
		s.writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "error": "store: " + err.Error(), "version": version.String()})
		return
	}
	s.writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": version.String()})
}

// checkStore runs Config.Health at most once a HealthCacheTTL and logs when
// the answer changes.
func (s *Server) checkStore(ctx context.Context) error {
	if s.cfg.Health == nil {
		return nil
	}
	h := &s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	now := s.cfg.Clock.Now()
	if !h.checked.IsZero() && now.Sub(h.checked) < HealthCacheTTL {
		return h.err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), healthTimeout)
	defer cancel()
	err := s.cfg.Health(ctx)
	switch {
	case err != nil && h.err == nil:
		s.log.Error("the store cannot take writes: /healthz answers 503", "err", err)
	case err == nil && h.err != nil:
		s.log.Info("the store takes writes again: /healthz answers ok")
	}
	h.checked, h.err = now, err
	return err
}
