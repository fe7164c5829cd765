package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/errandhq/errand/store"
)

// Live output travels by NOTIFY on a second channel of the schema, apart
// from the signals, so a process that follows no live output is not woken
// by every piece. A listener of it holds a connection of its own.

var _ store.OutputRelay = (*Store)(nil)

// outputChannel names the live output channel beside a signal channel,
// within PostgreSQL's 63-byte identifiers.
func outputChannel(signals string) string {
	const suffix = "/output"
	if len(signals)+len(suffix) > 63 {
		signals = signals[:63-len(suffix)]
	}
	return signals + suffix
}

// RelayOutput implements store.OutputRelay: one NOTIFY, outside any
// transaction, so nothing is written.
func (s *Store) RelayOutput(ctx context.Context, payload string) error {
	switch {
	case payload == "":
		return errors.New("relay output: payload is empty")
	case len(payload) > store.MaxOutputPayload:
		return fmt.Errorf("relay output: payload of %d bytes is over %d", len(payload), store.MaxOutputPayload)
	case !utf8.ValidString(payload) || strings.ContainsRune(payload, 0):
		return errors.New("relay output: payload is not text (invalid UTF-8 or NUL)")
	}
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, outputChannel(s.channel), payload); err != nil {
		return fmt.Errorf("relay output: %w", err)
	}
	return nil
}

// ListenOutput implements store.OutputRelay on a connection of its own,
// reconnecting when it is lost.
func (s *Store) ListenOutput(ctx context.Context, f func(payload string)) error {
	return s.listenLoop(ctx, outputChannel(s.channel), func() { f("") }, f)
}
