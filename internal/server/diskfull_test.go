package server

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/store"
)

// A write the store's disk had no room for is a 507 that says so and
// names the file, so that whoever reads it knows where to free space and
// that trying again then is safe; the daemon's log says it too.
func TestDiskFullIsInsufficientStorage(t *testing.T) {
	t.Parallel()
	c, err := errand.Open(t.Context(), filepath.Join(t.TempDir(), "errand.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	var logs syncBuffer
	s := New(Config{Client: c, Token: testToken, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	t.Cleanup(s.CloseStreams)

	full := fmt.Errorf("submit: insert task tsk_1: commit: %w",
		&store.DiskFullError{Where: "/data/errand.db", Cause: "database or disk is full (13)"})
	rec := httptest.NewRecorder()
	s.fail(rec, httptest.NewRequest("POST", "/api/tasks", nil), full)

	require.Equal(t, http.StatusInsufficientStorage, rec.Code)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var body api.ErrorBody
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
	require.Equal(t, codeDiskFull, body.Error.Code)
	require.Equal(t, "disk full: /data/errand.db: database or disk is full (13); nothing was written: free space on that disk and try again", body.Error.Message)
	require.Contains(t, logs.String(), "level=ERROR")
	require.Contains(t, logs.String(), `request="POST /api/tasks"`)
	require.Contains(t, logs.String(), "disk full: /data/errand.db")

	// The WebSocket answers a request with the same code and message.
	status, detail := s.classify(full, "ws submit")
	require.Equal(t, http.StatusInsufficientStorage, status)
	require.Equal(t, body.Error, detail)
}
