package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
)

// listAgents answers GET /api/agents: each agent and concurrency key with
// its tasks, limit and pause.
func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) {
	all, err := s.client.Agents(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, all)
}

func (s *Server) pauseAgent(w http.ResponseWriter, r *http.Request) {
	s.setAgentPaused(w, r, s.client.PauseAgent)
}

func (s *Server) resumeAgent(w http.ResponseWriter, r *http.Request) {
	s.setAgentPaused(w, r, s.client.ResumeAgent)
}

// setAgentPaused answers POST /api/agents/{name}/pause and /resume with
// the agent as it then stands; an unknown agent is a 404 naming it. A
// body, if sent, must be an empty object.
func (s *Server) setAgentPaused(w http.ResponseWriter, r *http.Request, set func(context.Context, string) (*errand.AgentState, error)) {
	var body struct{}
	if err := s.decode(w, r, &body, true); err != nil {
		s.fail(w, r, err)
		return
	}
	a, err := set(r.Context(), r.PathValue("name"))
	var unknown *errand.UnknownAgentError
	if errors.As(err, &unknown) {
		s.writeError(w, http.StatusNotFound, api.CodeNotFound, "no agent "+unknown.Name, "name")
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, a)
}
