package mcpserver

import (
	"context"
	"errors"
	"sync"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/apiclient"
)

// RemoteBackend serves the tools from a running daemon's HTTP API and
// event streams: errand mcp.
func RemoteBackend(c *apiclient.Client) Backend { return &remoteBackend{c: c} }

type remoteBackend struct{ c *apiclient.Client }

func (b *remoteBackend) Submit(ctx context.Context, body *api.CreateTask) (*api.Task, bool, error) {
	t, ok200, err := b.c.SubmitTask(ctx, body)
	// The daemon answers 200 for a debounced submit too: without an
	// idempotency key it cannot be a duplicate.
	return t, ok200 && body.IdempotencyKey != "", err
}

func (b *remoteBackend) Get(ctx context.Context, taskID string) (*api.Task, error) {
	return b.c.GetTask(ctx, taskID)
}

func (b *remoteBackend) List(ctx context.Context, p *ListParams) (*api.TaskList, error) {
	q := &apiclient.ListTasksParams{Session: p.SessionID, Limit: p.Limit, Cursor: p.Cursor}
	for _, st := range p.Statuses {
		q.Status = append(q.Status, string(st))
	}
	return b.c.ListTasks(ctx, q)
}

func (b *remoteBackend) Cancel(ctx context.Context, taskID, reason string) (*api.Task, error) {
	return b.c.CancelTask(ctx, taskID, reason)
}

func (b *remoteBackend) Answer(ctx context.Context, taskID, answer string) (*api.Input, error) {
	return b.c.AnswerInput(ctx, taskID, &api.AnswerInput{Answer: answer})
}

func (b *remoteBackend) Fork(ctx context.Context, taskID string, body *api.ForkTask) (*api.Task, error) {
	return b.c.ForkTask(ctx, taskID, body)
}

func (b *remoteBackend) PendingQuestion(ctx context.Context, taskID string) (*api.Input, error) {
	list, err := b.c.TaskInputs(ctx, taskID, errand.InputPending)
	if err != nil || len(list.Inputs) == 0 {
		return nil, err
	}
	return list.Inputs[len(list.Inputs)-1], nil
}

// Watch follows the task's event stream, which replays the task's events
// from its start: nothing between the caller's read and the stream's
// opening is lost, at the price of a first signal for old events.
func (b *remoteBackend) Watch(ctx context.Context, taskID string) (Watch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &remoteWatch{cancel: cancel, changed: make(chan struct{}, 1), done: make(chan struct{})}
	go w.run(ctx, b.c, taskID)
	return w, nil
}

type remoteWatch struct {
	cancel  context.CancelFunc
	changed chan struct{}
	done    chan struct{}

	mu  sync.Mutex
	err error
}

func (w *remoteWatch) run(ctx context.Context, c *apiclient.Client, taskID string) {
	defer close(w.done)
	defer close(w.changed)
	for ev, err := range c.Events(ctx, apiclient.EventsPath(taskID), 0) {
		if err == nil && ev.ID == 0 {
			continue // live output: the task did not change
		}
		if err != nil {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
			}
			return
		}
		signal(w.changed)
	}
}

func (w *remoteWatch) Changed() <-chan struct{} { return w.changed }

func (w *remoteWatch) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *remoteWatch) Close() {
	w.cancel()
	<-w.done
}
