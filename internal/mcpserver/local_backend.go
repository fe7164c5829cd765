package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	apiserver "github.com/errandhq/errand/internal/server"
)

// LocalBackend serves the tools from c directly: the daemon's /mcp.
func LocalBackend(c *errand.Client) Backend { return &localBackend{c: c} }

type localBackend struct{ c *errand.Client }

// errIdempotencyConflict is an idempotency key reused for another task.
var errIdempotencyConflict = errors.New("idempotency conflict")

func (b *localBackend) Submit(ctx context.Context, body *api.CreateTask) (*api.Task, bool, error) {
	p, err := apiserver.SubmitParams(body)
	if err != nil {
		return nil, false, err
	}
	res, err := b.c.SubmitResult(ctx, p)
	if err != nil {
		return nil, false, err
	}
	// A retry of the same request gets its task back; another request
	// reusing the key is refused, as POST /api/tasks does.
	if t := res.Task; res.Duplicate && (t.Goal != p.Goal || t.ParentID != p.ParentID || (p.Agent != "" && t.Agent != p.Agent)) {
		return nil, false, fmt.Errorf("%w: idempotency_key %q was used for task %s, which has a different goal, agent or parent",
			errIdempotencyConflict, truncate(p.IdempotencyKey), t.ID)
	}
	return api.FromTask(res.Task), res.Duplicate, nil
}

func (b *localBackend) Get(ctx context.Context, taskID string) (*api.Task, error) {
	t, err := b.c.Get(ctx, taskID)
	if err != nil {
		return nil, err
	}
	return api.FromTask(t), nil
}

func (b *localBackend) List(ctx context.Context, p *ListParams) (*api.TaskList, error) {
	res, err := b.c.List(ctx, &errand.ListParams{Statuses: p.Statuses, SessionID: p.SessionID, Limit: p.Limit, Cursor: p.Cursor})
	if err != nil {
		return nil, err
	}
	return &api.TaskList{Tasks: api.FromTasks(res.Tasks), NextCursor: res.NextCursor}, nil
}

func (b *localBackend) Cancel(ctx context.Context, taskID, reason string) (*api.Task, error) {
	t, err := b.c.Cancel(ctx, taskID, reason)
	if err != nil {
		return nil, err
	}
	return api.FromTask(t), nil
}

func (b *localBackend) Answer(ctx context.Context, taskID, answer string) (*api.Input, error) {
	if _, err := b.c.Get(ctx, taskID); err != nil {
		return nil, err
	}
	in, err := b.c.Answer(ctx, taskID, answer)
	if errors.Is(err, errand.ErrNotFound) {
		// The task exists: what is missing is an open question.
		return nil, fmt.Errorf("task %s has no open question: %w", taskID, errand.ErrInputClosed)
	}
	if err != nil {
		return nil, err
	}
	return api.FromInput(in), nil
}

func (b *localBackend) Fork(ctx context.Context, taskID string, body *api.ForkTask) (*api.Task, error) {
	p, err := apiserver.ForkParams(body)
	if err != nil {
		return nil, err
	}
	t, err := b.c.Fork(ctx, taskID, p)
	if err != nil {
		return nil, err
	}
	return api.FromTask(t), nil
}

func (b *localBackend) PendingQuestion(ctx context.Context, taskID string) (*api.Input, error) {
	ins, err := b.c.Inputs(ctx, errand.InputPending, taskID)
	if err != nil || len(ins) == 0 {
		return nil, err
	}
	return api.FromInput(ins[len(ins)-1]), nil
}

func (b *localBackend) Watch(ctx context.Context, taskID string) (Watch, error) {
	// From the journal's end as it is now: what the caller reads next is
	// at least that new, and everything after it is delivered.
	after, err := b.c.LastEventID(ctx)
	if err != nil {
		return nil, err
	}
	sub, err := b.c.Subscribe(ctx, errand.EventFilter{TaskID: taskID}, after)
	if err != nil {
		return nil, err
	}
	w := &localWatch{sub: sub, changed: make(chan struct{}, 1), done: make(chan struct{})}
	go w.run()
	return w, nil
}

type localWatch struct {
	sub     *errand.Subscription
	changed chan struct{}
	done    chan struct{}

	mu  sync.Mutex
	err error
}

func (w *localWatch) run() {
	defer close(w.done)
	defer close(w.changed)
	for range w.sub.Events() {
		signal(w.changed)
	}
	w.mu.Lock()
	w.err = w.sub.Err()
	w.mu.Unlock()
}

func (w *localWatch) Changed() <-chan struct{} { return w.changed }

func (w *localWatch) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *localWatch) Close() {
	w.sub.Close()
	<-w.done
}
