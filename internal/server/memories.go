package server

import (
	"net/http"
	"strings"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
)

// listMemories lists memories newest first or, with q, searches them.
func (s *Server) listMemories(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Has("q") && strings.TrimSpace(q.Get("q")) == "" {
		s.fail(w, r, malformed("q", "q must hold a word to search for; leave it out to list"))
		return
	}
	limit, err := queryLimit(r, 0)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page, err := s.client.ListMemories(r.Context(), &errand.MemoryListParams{
		TaskID: q.Get("task_id"), Agent: q.Get("agent"), Source: q.Get("source"),
		Query: q.Get("q"), Cursor: q.Get("cursor"), Limit: limit,
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, api.MemoryList{Memories: api.FromMemories(page.Memories), NextCursor: page.NextCursor})
}

func (s *Server) getMemory(w http.ResponseWriter, r *http.Request) {
	m, err := s.client.Memory(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, api.FromMemory(m))
}

func (s *Server) deleteMemory(w http.ResponseWriter, r *http.Request) {
	if err := s.decode(w, r, &struct{}{}, true); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.client.DeleteMemory(r.Context(), r.PathValue("id")); err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusNoContent)
}

// purgeMemories removes everything one task, agent or source wrote.
func (s *Server) purgeMemories(w http.ResponseWriter, r *http.Request) {
	var body api.PurgeMemories
	if err := s.decode(w, r, &body, false); err != nil {
		s.fail(w, r, err)
		return
	}
	n, err := s.client.PurgeMemories(r.Context(), &errand.MemoryPurgeParams{TaskID: body.TaskID, Agent: body.Agent, Source: body.Source})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, api.PurgeResult{Purged: n})
}
