package pgstore

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand/store"
)

// Signals travel by NOTIFY on one channel per schema, so errands sharing a
// database in different schemas do not wake each other. A payload is
// space-separated codes: w (written), r (ready), s (schedules), $ (spend),
// a (agents), c:<task id> (cancel), p:<task id> (pause).

// maxPayload keeps a payload under NOTIFY's 8000-byte limit.
const maxPayload = 7000

// signal queues a signal to send when tx commits; a repeated one is sent
// once.
func (tx *txn) signal(sig store.Signal) {
	for _, s := range tx.signals {
		if s == sig {
			return
		}
	}
	tx.signals = append(tx.signals, sig)
}

func encodeSignal(sig store.Signal) string {
	switch sig.Kind {
	case store.SignalWritten:
		return "w"
	case store.SignalReady:
		return "r"
	case store.SignalSchedules:
		return "s"
	case store.SignalSpend:
		return "$"
	case store.SignalAgents:
		return "a"
	case store.SignalCancel:
		return "c:" + sig.TaskID
	case store.SignalPause:
		return "p:" + sig.TaskID
	}
	return ""
}

func decodeSignals(payload string) []store.Signal {
	var out []store.Signal
	for code := range strings.FieldsSeq(payload) {
		var sig store.Signal
		switch {
		case code == "w":
			sig.Kind = store.SignalWritten
		case code == "r":
			sig.Kind = store.SignalReady
		case code == "s":
			sig.Kind = store.SignalSchedules
		case code == "$":
			sig.Kind = store.SignalSpend
		case code == "a":
			sig.Kind = store.SignalAgents
		case strings.HasPrefix(code, "c:"):
			sig = store.Signal{Kind: store.SignalCancel, TaskID: code[2:]}
		case strings.HasPrefix(code, "p:"):
			sig = store.Signal{Kind: store.SignalPause, TaskID: code[2:]}
		default:
			continue // a code from a newer errand
		}
		out = append(out, sig)
	}
	return out
}

// payloads packs signals into NOTIFY payloads.
func payloads(sigs []store.Signal) []string {
	var (
		out []string
		b   strings.Builder
	)
	for _, sig := range sigs {
		code := encodeSignal(sig)
		if code == "" {
			continue
		}
		if b.Len() > 0 && b.Len()+1+len(code) > maxPayload {
			out = append(out, b.String())
			b.Reset()
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(code)
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

// listenRetry bounds the wait between attempts to listen again after the
// connection was lost.
const listenRetry = 5 * time.Second

// Listen implements store.Signaler. It holds one connection of its own,
// outside the pool, and reconnects when it is lost; each time it starts
// listening it tells f that anything may have happened before.
func (s *Store) Listen(ctx context.Context, f func(store.Signal)) error {
	return s.listenLoop(ctx, s.channel, func() {
		// Whatever committed before LISTEN took effect was not heard: at
		// the first start (the caller may have begun earlier) as after a
		// reconnect, anything may have happened.
		for _, k := range []store.SignalKind{store.SignalMissed, store.SignalWritten, store.SignalReady, store.SignalSchedules, store.SignalSpend, store.SignalAgents} {
			f(store.Signal{Kind: k})
		}
		if s.listening != nil {
			s.listening()
		}
	}, func(payload string) {
		for _, sig := range decodeSignals(payload) {
			f(sig)
		}
	})
}

// listenLoop listens on channel until ctx ends, reconnecting when the
// connection is lost; started is called each time it listens.
func (s *Store) listenLoop(ctx context.Context, channel string, started func(), heard func(payload string)) error {
	wait := 50 * time.Millisecond
	for {
		listening, err := s.listen(ctx, channel, started, heard)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if listening {
			wait = 50 * time.Millisecond // it worked for a while: retry soon
		}
		s.logf("listen on %s: %v; again in %s", channel, err, wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, listenRetry)
	}
}

// listen listens on one connection until it fails; listening reports
// whether it got as far as listening.
func (s *Store) listen(ctx context.Context, channel string, started func(), heard func(payload string)) (listening bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{channel}.Sanitize()); err != nil {
		return false, err
	}
	started()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		heard(n.Payload)
	}
}
