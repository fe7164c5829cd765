package a2a

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

// A write the store's disk had no room for is told as the HTTP API tells
// it: which disk, that nothing was written, and what to do. Other faults
// stay in the log.
func TestDiskFullIsToldNotHidden(t *testing.T) {
	t.Parallel()
	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	req := &request{name: "SendMessage"}
	full := s.internal(req, fmt.Errorf("submit: %w", &store.DiskFullError{Where: "/data/errand.db", Cause: "database or disk is full"}))
	require.Equal(t, CodeInternalError, full.Code)
	require.Equal(t, "SendMessage failed: disk full: /data/errand.db: database or disk is full; nothing was written: free space on that disk and try again", full.Message)

	other := s.internal(req, errors.New("disk I/O error: /var/lib/secret.db"))
	require.NotContains(t, other.Message, "secret.db")
}
