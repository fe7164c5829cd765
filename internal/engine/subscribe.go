package engine

import (
	"context"
	"errors"
	"sync"

	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/store"
)

// EventFilter narrows a subscription. Empty fields do not filter.
type EventFilter struct {
	TaskID string
	Types  []string
	// Live, with TaskID, also delivers the task's live output as events of
	// type store.EventTaskOutputDelta with ID 0 (not journal events; data:
	// a live.Delta), first the text so far of each live call. A piece is
	// delivered before any journal event written after it.
	Live bool
}

// Subscription delivers journal events in id order.
type Subscription struct {
	events chan *store.Event
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	err error
}

// Events is closed when the subscription ends; Err then says why.
func (s *Subscription) Events() <-chan *store.Event { return s.events }

// Err is nil while the subscription runs, and after Close.
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the subscription and waits for its goroutine.
func (s *Subscription) Close() {
	s.cancel()
	<-s.done
}

// Subscribe delivers every event after afterID that matches filter, first
// those already in the journal, then new ones as they are written, with no
// gap and no duplicate: it reads the journal by id, so what it sends is
// exactly the committed sequence. A slow reader slows only its own
// subscription. It ends when ctx is done or Close is called.
func (e *Engine) Subscribe(ctx context.Context, filter EventFilter, afterID int64) (*Subscription, error) {
	if afterID < 0 {
		return nil, invalid("after", "%d must not be negative", afterID)
	}
	var deltas *liveFollow
	if wantsLive(filter) {
		// Now, so that the subscription follows the output from its start.
		deltas = e.out.follow(filter.TaskID)
	}
	ctx, cancel := context.WithCancel(ctx)
	sub := &Subscription{
		events: make(chan *store.Event, DefaultSubscribeBuffer),
		cancel: cancel,
		done:   make(chan struct{}),
	}
	go func() {
		defer close(sub.done)
		defer close(sub.events)
		defer deltas.close()
		err := e.follow(ctx, filter, afterID, deltas, sub.events)
		if err != nil && !errors.Is(err, context.Canceled) {
			sub.mu.Lock()
			sub.err = err
			sub.mu.Unlock()
		}
	}()
	return sub, nil
}

func (e *Engine) follow(ctx context.Context, filter EventFilter, cursor int64, deltas *liveFollow, out chan<- *store.Event) error {
	poll := e.clock.NewTicker(e.cfg.PollInterval)
	defer poll.Stop()
	for {
		woken := e.written.wait()
		events, err := e.store.EventList(ctx, &store.EventListParams{
			AfterID: cursor, TaskID: filter.TaskID, Types: filter.Types, Limit: DefaultEventPageSize,
		})
		if err != nil {
			return err
		}
		for _, ev := range events {
			// A piece is written before the record of its step commits:
			// whatever the hub holds now goes before this event.
			if err := deltas.send(ctx, out); err != nil {
				return err
			}
			if err := deltas.beforeStep(ctx, ev, out); err != nil {
				return err
			}
			select {
			case out <- ev:
				cursor = ev.ID
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if len(events) == DefaultEventPageSize {
			continue
		}
		if err := e.waitJournal(ctx, woken, poll, deltas, out); err != nil {
			return err
		}
	}
}

// waitJournal sends live deltas as they come until the journal may have
// grown (a wake-up or a poll tick) or ctx ends.
func (e *Engine) waitJournal(ctx context.Context, woken <-chan struct{}, poll clock.Ticker, deltas *liveFollow, out chan<- *store.Event) error {
	for {
		select {
		case <-woken:
			return nil
		case <-poll.C():
			return nil
		case <-deltas.ready():
			if err := deltas.send(ctx, out); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
