package apiclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/errandhq/errand"
)

// Agents lists each agent and concurrency key with its tasks, limit and
// pause: GET /api/agents.
func (c *Client) Agents(ctx context.Context) (*errand.AgentStates, error) {
	var out errand.AgentStates
	return &out, c.do(ctx, http.MethodGet, "/api/agents", nil, &out)
}

// PauseAgent pauses an agent for every daemon: POST
// /api/agents/{name}/pause. An unknown agent is a 404.
func (c *Client) PauseAgent(ctx context.Context, name string) (*errand.AgentState, error) {
	var out errand.AgentState
	return &out, c.do(ctx, http.MethodPost, "/api/agents/"+url.PathEscape(name)+"/pause", nil, &out)
}

// ResumeAgent resumes a paused agent: POST /api/agents/{name}/resume.
func (c *Client) ResumeAgent(ctx context.Context, name string) (*errand.AgentState, error) {
	var out errand.AgentState
	return &out, c.do(ctx, http.MethodPost, "/api/agents/"+url.PathEscape(name)+"/resume", nil, &out)
}
