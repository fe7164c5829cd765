package server

import "net/http"

// agui is POST /api/ag-ui: the AG-UI protocol endpoint.
func (s *Server) agui(w http.ResponseWriter, r *http.Request) {
	s.unknownRoute(w, r)
}
