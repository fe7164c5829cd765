package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/clock"
)

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// /healthz answers 503 while the store cannot take a write, so a load
// balancer sends no work to a daemon that would fail it; it asks the store
// at most once a HealthCacheTTL, and logs when the answer changes.
func TestHealthzReportsAStoreThatCannotWrite(t *testing.T) {
	t.Parallel()
	c, err := errand.Open(t.Context(), filepath.Join(t.TempDir(), "errand.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })

	var (
		mu     sync.Mutex
		broken error
		checks int
	)
	health := func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		checks++
		if broken != nil {
			return broken
		}
		return c.CheckWritable(ctx)
	}
	setBroken := func(err error) { mu.Lock(); broken = err; mu.Unlock() }
	checked := func() int { mu.Lock(); defer mu.Unlock(); return checks }

	fake := clock.NewFake(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	var logs syncBuffer
	s := New(Config{Client: c, Token: testToken, Clock: fake, Health: health, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() { s.CloseStreams(); srv.Close() })
	get := func() (int, map[string]string) {
		res, err := http.Get(srv.URL + "/healthz")
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		var body map[string]string
		require.NoError(t, json.Unmarshal(b, &body), string(b))
		return res.StatusCode, body
	}

	code, body := get()
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok", body["status"])
	require.Equal(t, 1, checked())

	setBroken(errors.New("attempt to write a readonly database"))
	code, _ = get()
	require.Equal(t, http.StatusOK, code, "within the TTL the last answer stands")
	require.Equal(t, 1, checked())

	fake.Advance(HealthCacheTTL)
	code, body = get()
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "unavailable", body["status"])
	require.Contains(t, body["error"], "readonly database")
	require.Contains(t, logs.String(), "level=ERROR")
	require.Contains(t, logs.String(), "cannot take writes")

	setBroken(nil)
	fake.Advance(HealthCacheTTL)
	code, _ = get()
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, logs.String(), "takes writes again")
	require.Equal(t, 3, checked())
}
