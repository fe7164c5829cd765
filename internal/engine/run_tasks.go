package engine

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// maxActiveTasks bounds what ActiveTasks returns.
const maxActiveTasks = 200

// activeStatuses are the statuses of tasks that have not ended.
var activeStatuses = func() []store.Status {
	var out []store.Status
	for _, s := range store.AllStatuses {
		if !s.Terminal() {
			out = append(out, s)
		}
	}
	return out
}()

func (r *run) SubmitSubtask(ctx context.Context, spec taskrun.SubtaskSpec) (*taskrun.TaskView, error) {
	if !r.x.trusted() {
		return nil, store.ErrLeaseLost
	}
	t := r.x.task
	// A child for an agent nobody runs would wait forever; say so now.
	if err := r.x.pool.e.checkAgent(spec.Agent); err != nil {
		return nil, err
	}
	child, err := r.x.pool.e.Submit(ctx, &SubmitParams{
		Goal: spec.Goal, Title: spec.Title, Agent: spec.Agent, Priority: spec.Priority, DependsOn: spec.DependsOn,
		Input: spec.Input, ParentID: t.ID, SessionID: t.SessionID, IdempotencyKey: spec.IdempotencyKey,
		Source: store.SourceAgent, Actor: store.AgentActor(t.ID),
	})
	if err != nil {
		return nil, err
	}
	return view(child), nil
}

func (r *run) Answers(ctx context.Context) ([]taskrun.Answer, error) {
	reqs, err := r.x.pool.e.store.InputList(ctx, &store.InputListParams{TaskID: r.x.task.ID, Status: store.InputAnswered, Limit: 1000})
	if err != nil {
		return nil, err
	}
	answers := make([]taskrun.Answer, len(reqs))
	for i, in := range reqs {
		answers[i] = taskrun.Answer{RequestID: in.ID, Question: in.Question, Answer: in.Answer, AnsweredAt: in.AnsweredAt}
	}
	return answers, nil
}

// Subtasks lists the task's children, oldest first; a fork's begin with
// those it kept from its source (see adoptedSubtasks).
func (r *run) Subtasks(ctx context.Context) ([]*taskrun.TaskView, error) {
	adopted, err := r.x.pool.e.adoptedSubtasks(ctx, r.x.task)
	if err != nil {
		return nil, err
	}
	var views []*taskrun.TaskView
	cursor := ""
	for {
		page, err := r.x.pool.e.List(ctx, &ListParams{ParentID: r.x.task.ID, Limit: MaxListLimit, Cursor: cursor})
		if err != nil {
			return nil, err
		}
		for _, t := range page.Tasks {
			views = append(views, view(t))
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	slices.Reverse(views) // oldest first
	kept := make([]*taskrun.TaskView, 0, len(adopted)+len(views))
	for _, t := range adopted {
		kept = append(kept, view(t))
	}
	return append(kept, views...), nil
}

func (r *run) TaskStatus(ctx context.Context, taskID string) (*taskrun.TaskView, error) {
	t, err := r.x.pool.e.Get(ctx, taskID)
	if err != nil {
		return nil, err
	}
	return view(t), nil
}

func (r *run) ActiveTasks(ctx context.Context) ([]*taskrun.TaskView, error) {
	params := &ListParams{RunID: r.x.task.RunID, Statuses: activeStatuses, Limit: maxActiveTasks}
	if o := r.x.task.Options; o != nil && o.Scout {
		params.RunID = "" // a scout watches every run
	}
	page, err := r.x.pool.e.List(ctx, params)
	if err != nil {
		return nil, err
	}
	views := make([]*taskrun.TaskView, 0, len(page.Tasks))
	for _, t := range page.Tasks {
		if t.ID != r.x.task.ID {
			views = append(views, view(t))
		}
	}
	return views, nil
}

func (r *run) CancelTask(ctx context.Context, taskID, reason string) (*taskrun.TaskView, error) {
	if !r.x.trusted() {
		return nil, store.ErrLeaseLost
	}
	if taskID == r.x.task.ID {
		return nil, errors.New("a task cannot cancel itself; finish it instead")
	}
	t, err := r.x.pool.e.Cancel(ctx, taskID, reason, store.AgentActor(r.x.task.ID))
	if err != nil {
		return nil, err
	}
	return view(t), nil
}

// view is what an agent sees of a task.
func view(t *store.Task) *taskrun.TaskView {
	v := &taskrun.TaskView{ID: t.ID, ParentID: t.ParentID, Title: t.Title, Agent: t.Agent, Status: string(t.Status)}
	if p := t.Progress; p != nil {
		v.Progress = &taskrun.ProgressView{Current: p.CurrentStep, Total: p.TotalSteps, Label: p.Label, Percentage: p.Percentage}
	}
	if len(t.Result) > 0 {
		v.Result = json.RawMessage(t.Result)
	}
	if t.Error != nil {
		v.Error = t.Error.Code + ": " + t.Error.Message
	}
	return v
}
