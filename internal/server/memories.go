package server

import (
	"net/http"
	"net/url"
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
	flagged, err := flaggedFilter(q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page, err := s.client.ListMemories(r.Context(), &errand.MemoryListParams{
		TaskID: q.Get("task_id"), Agent: q.Get("agent"), Source: q.Get("source"),
		Query: q.Get("q"), Flagged: flagged, Cursor: q.Get("cursor"), Limit: limit,
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, api.MemoryList{Memories: api.FromMemories(page.Memories), NextCursor: page.NextCursor})
}

// flaggedFilter reads ?flagged=: absent lists every memory, true only the
// quarantined ones, false only the others. Anything else, an empty value
// or the parameter twice included, is refused rather than ignored, so a
// filter never silently lists everything.
func flaggedFilter(q url.Values) (*bool, error) {
	vs, ok := q["flagged"]
	if !ok {
		return nil, nil
	}
	if len(vs) != 1 {
		return nil, malformed("flagged", `give query parameter "flagged" once: true lists the quarantined memories, false the others`)
	}
	switch vs[0] {
	case "true":
		return new(true), nil
	case "false":
		return new(false), nil
	}
	return nil, malformed("flagged", `query parameter "flagged" must be true or false, not %q`, vs[0])
}

func (s *Server) getMemory(w http.ResponseWriter, r *http.Request) {
	m, err := s.client.Memory(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, api.FromMemory(m))
}

// releaseMemory releases a quarantined memory (journaled as
// memory.released) and answers with it; a memory that is not flagged
// comes back as it is.
func (s *Server) releaseMemory(w http.ResponseWriter, r *http.Request) {
	if err := s.decode(w, r, &struct{}{}, true); err != nil {
		s.fail(w, r, err)
		return
	}
	m, err := s.client.ReleaseMemory(r.Context(), r.PathValue("id"))
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
