package server

import (
	"errors"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/validation"
)

// SubmitParams turns a POST /api/tasks body into a submit request, as a
// schedule's template is turned (engine.ParamsFromBody): what Submit
// validates it leaves to Submit. The MCP face shares it.
func SubmitParams(body *api.CreateTask) (*errand.SubmitParams, error) {
	p, err := engine.ParamsFromBody(body)
	if err != nil {
		var v *validation.Error
		if errors.As(err, &v) {
			return nil, &errand.ValidationError{Field: v.Field, Message: v.Message, Unprocessable: v.Unprocessable}
		}
		return nil, err
	}
	return fromEngineParams(p), nil
}

// fromEngineParams is the engine's submit request as errand takes it.
func fromEngineParams(p *engine.SubmitParams) *errand.SubmitParams {
	return &errand.SubmitParams{
		Goal: p.Goal, Title: p.Title, Agent: p.Agent, Input: p.Input, Metadata: p.Metadata, Tags: p.Tags,
		Priority: p.Priority, ParentID: p.ParentID, DependsOn: p.DependsOn, OnDependencyFailure: p.OnDependencyFailure,
		SessionID: p.SessionID, RunAt: p.RunAt, MaxAttempts: p.MaxAttempts, IdempotencyKey: p.IdempotencyKey,
		Budget: p.Budget, MaxSteps: p.MaxSteps, Tools: p.Tools, ToolsDeny: p.ToolsDeny, SystemPrompt: p.SystemPrompt,
		InputTimeout: p.InputTimeout, InputDefault: p.InputDefault, Source: p.Source,
		ResultRoute: p.ResultRoute, Chain: p.Chain, Scout: p.Scout,
		MaxMemoryTokens: p.MaxMemoryTokens, MaxMemoryEntries: p.MaxMemoryEntries, RecallFlagged: p.RecallFlagged,
		Lane: p.Lane, ConcurrencyKey: p.ConcurrencyKey, Actor: p.Actor, Debounce: (*errand.Debounce)(p.Debounce),
	}
}
