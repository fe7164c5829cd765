package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/errandhq/errand/internal/id"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// ForkParams says which task to fork, from which step, and what the fork
// changes. Empty fields keep the source's.
type ForkParams struct {
	TaskID   string
	FromStep int // ≥ 1: steps before it are copied as done, it and those after run live
	Goal     string
	Input    json.RawMessage
	// Answer replaces the answer to the last question the source asked
	// before FromStep (422 when it asked none).
	Answer *string
	Agent  string
	Budget *store.Budget
}

// maxForkHops bounds how far up a chain of forks Fork and a fork's run
// look for the subtasks it keeps.
const maxForkHops = 64

// Fork writes a new task that replays the source's steps before FromStep,
// never running or paying for them again, and runs live from FromStep on.
//
// The fork is a top-level task like the source as submitted: its goal,
// title, agent, input, metadata, tags, priority, session, attempts,
// budget and options, but for what p changes. Its agent rebuilds its
// state by replaying the copied steps (no checkpoint is copied). The
// subtasks the copied steps submitted are the source's and are not run
// again: the fork's run sees them among its own (see adoptedSubtasks),
// and waits, blocked, for those that have not ended yet.
//
// An unknown source matches store.ErrNotFound; a from_step or answer the
// source does not allow is a 422 *validation.Error naming it.
func (e *Engine) Fork(ctx context.Context, p *ForkParams) (*store.Task, error) {
	if p == nil {
		p = &ForkParams{}
	}
	if p.FromStep < 1 {
		return nil, unprocessable("from_step", "%d is not a step: steps are numbered from 1", p.FromStep)
	}
	if a := p.Answer; a != nil {
		if strings.TrimSpace(*a) == "" {
			return nil, invalid("answer", "must not be empty")
		}
		if len(*a) > DefaultMaxGoalBytes {
			return nil, invalid("answer", "is %d bytes; the limit is %d", len(*a), DefaultMaxGoalBytes)
		}
	}
	src, err := e.store.TaskGetByID(ctx, p.TaskID)
	if err != nil {
		return nil, fmt.Errorf("fork %s: %w", p.TaskID, err)
	}
	if p.Agent != "" {
		if err := e.checkAgent(p.Agent); err != nil {
			return nil, err
		}
	}
	params, err := e.forkInsert(src, p)
	if err != nil {
		return nil, err
	}
	kept, err := e.adoptedSubtasks(ctx, &store.Task{ForkedFrom: &store.ForkRef{TaskID: src.ID, StepNo: p.FromStep}})
	if err != nil {
		return nil, fmt.Errorf("fork %s: %w", src.ID, err)
	}
	for _, k := range kept {
		if !k.Status.Terminal() {
			// The fork replays their results: it waits until they have one.
			params.DependsOn = append(params.DependsOn, k.ID)
			params.OnDependencyFailure = store.OnDependencyFailureRun
		}
	}
	t, err := e.store.TaskFork(ctx, &store.TaskForkParams{
		Task: params, SourceID: src.ID, FromStep: p.FromStep, Answer: p.Answer,
		StepKeyFunc: taskrun.StepKey,
		InputIDFunc: func() string { return id.New(id.Input) },
	})
	var fe *store.ForkError
	switch {
	case errors.As(err, &fe):
		return nil, unprocessable(fe.Field, "%s", fe.Reason)
	case err != nil:
		return nil, fmt.Errorf("fork %s: %w", src.ID, err)
	}
	e.madeReady()
	return t, nil
}

// forkInsert is the fork of src that p describes, as a submit writes a
// task, checked as a submit is.
func (e *Engine) forkInsert(src *store.Task, p *ForkParams) (*store.TaskInsertParams, error) {
	sp := &SubmitParams{
		Goal: cmp.Or(p.Goal, src.Goal), Agent: cmp.Or(p.Agent, src.Agent), Input: src.Input,
		Metadata: src.Metadata, Tags: src.Tags, Priority: &src.Priority, SessionID: src.SessionID,
		MaxAttempts: src.MaxAttempts, Budget: cmp.Or(p.Budget, src.Budget), Actor: store.ActorUser,
	}
	if p.Goal == "" {
		sp.Title = src.Title
	}
	if len(p.Input) > 0 {
		sp.Input = p.Input
	}
	params, err := e.validate(sp)
	if err != nil {
		return nil, err
	}
	if src.Options != nil {
		// The source's own settings, as they were checked when it was
		// submitted.
		o := *src.Options
		params.Options = &o
	}
	return params, nil
}

// adoptedSubtasks are the subtasks a fork keeps from its source, oldest
// first: the children that the source's steps before the fork's first
// live step submitted (a child's idempotency key starts with the key of
// the step that submitted it), and, when the source is a fork itself,
// those it kept from before that step. None for a task that is not a
// fork, or whose source was purged.
func (e *Engine) adoptedSubtasks(ctx context.Context, t *store.Task) ([]*store.Task, error) {
	var out []*store.Task
	before := math.MaxInt
	for hops := 0; t.ForkedFrom != nil && hops < maxForkHops; hops++ {
		before = min(before, t.ForkedFrom.StepNo)
		src, err := e.store.TaskGetByID(ctx, t.ForkedFrom.TaskID)
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		kids, err := e.children(ctx, src.ID)
		if err != nil {
			return nil, err
		}
		for _, k := range kids {
			if n, ok := submittingStep(k.IdempotencyKey, src.ID); ok && n < before {
				out = append(out, k)
			}
		}
		t = src
	}
	slices.SortFunc(out, func(a, b *store.Task) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// children are a task's children, newest first.
func (e *Engine) children(ctx context.Context, parentID string) ([]*store.Task, error) {
	var out []*store.Task
	cursor := ""
	for {
		page, err := e.store.TaskList(ctx, &store.TaskListParams{ParentID: parentID, Cursor: cursor, Limit: MaxListLimit})
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < MaxListLimit {
			return out, nil
		}
		cursor = page[len(page)-1].ID
	}
}

// submittingStep is the number of the step of parentID whose key begins
// key (see taskrun.StepKey): the step that submitted the child with key.
func submittingStep(key, parentID string) (int, bool) {
	rest, ok := strings.CutPrefix(key, parentID+":")
	if !ok {
		return 0, false
	}
	digits, _, _ := strings.Cut(rest, ":")
	n, err := strconv.Atoi(digits)
	return n, err == nil
}
