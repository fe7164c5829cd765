package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/clock"
)

// settled reports whether a waiter is done with a task in st: it ended, or
// it waits for an answer only the caller can give.
func settled(st errand.Status) bool {
	return st.Terminal() || st == errand.StatusInputRequired
}

// waitTask waits for the task to settle, waking on its events: it reads
// the task again only when the task changed, and never polls.
func (s *server) waitTask(ctx context.Context, req *mcp.CallToolRequest, a waitArgs) (any, string, error) {
	if err := checkTaskID("task_id", a.TaskID); err != nil {
		return nil, "", err
	}
	timeout, err := waitTimeout(a.TimeoutSeconds)
	if err != nil {
		return nil, "", err
	}
	timer := s.cfg.Clock.NewTimer(timeout)
	defer timer.Stop()
	var changed <-chan struct{}
	var w Watch
	if timeout > 0 {
		// Before the read: a change after it is then never missed.
		if w, err = s.backend.Watch(ctx, a.TaskID); err != nil {
			return nil, "", taskError(err, a.TaskID)
		}
		defer w.Close()
		changed = w.Changed()
	}
	t, err := s.backend.Get(ctx, a.TaskID)
	if err != nil {
		return nil, "", taskError(err, a.TaskID)
	}
	progress := s.newProgress(req)
	var ticks <-chan time.Time
	if progress != nil {
		ticker := s.cfg.Clock.NewTicker(s.cfg.ProgressInterval)
		defer ticker.Stop()
		ticks = ticker.C()
	}
	timedOut := false
	for !settled(t.Status) && !timedOut {
		progress.report(ctx, t)
		select {
		case _, ok := <-changed:
			if !ok {
				if ctx.Err() != nil {
					return cutShort(ctx, t)
				}
				return nil, "", watchEnded(a.TaskID, w)
			}
		case <-ticks:
			continue
		case <-timer.C():
			timedOut = true
		case <-ctx.Done():
			return cutShort(ctx, t)
		}
		next, err := s.backend.Get(ctx, a.TaskID)
		if err != nil {
			if ctx.Err() != nil {
				return cutShort(ctx, t)
			}
			return nil, "", taskError(err, a.TaskID)
		}
		t = next
	}
	timedOut = !settled(t.Status)
	res := &taskResult{Task: t, TimedOut: &timedOut}
	if err := s.addQuestion(ctx, res); err != nil {
		return nil, "", err
	}
	return res, describeResult(res), nil
}

// cutShort ends a wait whose context ended with the task t as last read.
// A shutdown is like a timeout: the client waits again once errand is
// back. Anything else is the caller gone, with nobody to answer.
func cutShort(ctx context.Context, t *api.Task) (any, string, error) {
	if !errors.Is(context.Cause(ctx), errShuttingDown) {
		return nil, "", ctx.Err()
	}
	timedOut := true
	res := &taskResult{Task: t, TimedOut: &timedOut}
	return res, "errand is shutting down; call wait_for_task again once it is back. " + describeResult(res), nil
}

// watchEnded says why a watch stopped before the task settled.
func watchEnded(taskID string, w Watch) error {
	if err := w.Err(); err != nil {
		return fmt.Errorf("follow task %s: %w", taskID, err)
	}
	return errors.New("following task " + taskID + " ended early; call wait_for_task again")
}

// progress reports a wait's progress to a client that sent a progress
// token: the seconds waited, which always grow as the protocol wants,
// with the task's state as the message.
type progress struct {
	session *mcp.ServerSession
	token   any
	clock   clock.Clock
	start   time.Time
	last    float64
}

func (s *server) newProgress(req *mcp.CallToolRequest) *progress {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return nil
	}
	return &progress{session: req.Session, token: token, clock: s.cfg.Clock, start: s.cfg.Clock.Now(), last: -1}
}

func (p *progress) report(ctx context.Context, t *api.Task) {
	if p == nil {
		return
	}
	v := max(p.clock.Now().Sub(p.start).Seconds(), p.last+0.001)
	p.last = v
	// A client that cannot take it loses nothing the result will not say.
	_ = p.session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: v, Message: taskState(t)})
}
