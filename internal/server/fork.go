package server

import "net/http"

// forkTask is POST /api/tasks/{id}/fork.
func (s *Server) forkTask(w http.ResponseWriter, r *http.Request) {
	s.unknownRoute(w, r)
}
