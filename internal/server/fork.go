package server

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/validation"
)

const (
	// maxAnswerBytes bounds an answer, as POST /api/tasks/{id}/input does.
	maxAnswerBytes = 64 << 10
	// MaxListedForks bounds the forks GET /api/tasks/{id} lists: the
	// newest ones, oldest first.
	MaxListedForks = 100
)

// withForks is the wire shape of t with the ids of the tasks forked from
// it (an indexed read).
func (s *Server) withForks(ctx context.Context, t *errand.Task) (*api.Task, error) {
	res, err := s.client.List(ctx, &errand.ListParams{ForkedFrom: t.ID, Limit: MaxListedForks})
	if err != nil {
		return nil, err
	}
	w := api.FromTask(t)
	w.Forks = make([]string, len(res.Tasks))
	for i, f := range res.Tasks {
		w.Forks[len(res.Tasks)-1-i] = f.ID // the list is newest first
	}
	return w, nil
}

// forkTask is POST /api/tasks/{id}/fork: a new task that replays the
// source's steps before from_step and runs live from it. It answers 201
// with the new task, as POST /api/tasks does.
func (s *Server) forkTask(w http.ResponseWriter, r *http.Request) {
	var body api.ForkTask
	if err := s.decode(w, r, &body, false); err != nil {
		s.fail(w, r, err)
		return
	}
	p, err := ForkParams(&body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	t, err := s.client.Fork(r.Context(), r.PathValue("id"), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/tasks/"+t.ID)
	s.writeJSON(w, http.StatusCreated, api.FromTask(t))
}

// ForkParams checks a fork body as far as it can be checked without the
// source task, and turns it into a fork request; the engine checks the
// rest (a step the source has not done, an answer with no question before
// it, an unknown agent) and answers 422. The MCP face shares it.
func ForkParams(body *api.ForkTask) (*errand.ForkParams, error) {
	if body.FromStep == nil {
		return nil, &errand.ValidationError{Field: "from_step", Message: "is required: the first step the fork runs live (≥ 1)"}
	}
	if *body.FromStep < 1 {
		return nil, &errand.ValidationError{Field: "from_step", Message: "must be 1 or more (steps are numbered from 1)"}
	}
	if a := body.Answer; a != nil {
		switch {
		case strings.TrimSpace(*a) == "":
			return nil, &errand.ValidationError{Field: "answer", Message: "must not be empty (leave it out to keep the source's answer)"}
		case len(*a) > maxAnswerBytes:
			return nil, &errand.ValidationError{Field: "answer", Message: "is longer than 64 KiB"}
		}
		if err := checkText("answer", *a); err != nil {
			return nil, err
		}
	}
	if err := checkText("goal", body.Goal); err != nil {
		return nil, err
	}
	input := bytes.TrimSpace(body.Input)
	switch {
	case string(input) == "null":
		input = nil // null is as good as absent
	case len(input) > 0 && input[0] != '{':
		return nil, &errand.ValidationError{Field: "input", Message: "must be a JSON object"}
	}
	return &errand.ForkParams{
		FromStep: *body.FromStep, Goal: body.Goal, Input: input,
		Answer: body.Answer, Agent: body.Agent, Budget: body.Budget,
	}, nil
}

// checkText is validation.CheckText as errand reports it.
func checkText(field, s string) error {
	var v *validation.Error
	if err := validation.CheckText(field, s); errors.As(err, &v) {
		return &errand.ValidationError{Field: v.Field, Message: v.Message}
	}
	return nil
}
