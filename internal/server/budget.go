package server

import (
	"context"
	"net/http"
	"os"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
)

// runningListLimit bounds the running tasks a budget summary lists.
const runningListLimit = 100

func (s *Server) budget(w http.ResponseWriter, r *http.Request) {
	s.writeBudget(w, r, nil)
}

func (s *Server) patchBudget(w http.ResponseWriter, r *http.Request) {
	var body api.BudgetPatch
	if err := s.decode(w, r, &body, false); err != nil {
		s.fail(w, r, err)
		return
	}
	g, err := s.client.SpendGuard(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	l := g.Limits
	if body.DailyUSD != nil {
		l.DailyUSD = *body.DailyUSD
	}
	if body.MonthlyUSD != nil {
		l.MonthlyUSD = *body.MonthlyUSD
	}
	if body.AlertThresholds != nil {
		l.AlertThresholds = *body.AlertThresholds
	}
	if body.OnLimit != nil {
		l.OnLimit = *body.OnLimit
	}
	if body.Timezone != nil {
		l.Timezone = *body.Timezone
	}
	g, err = s.client.SetSpendLimits(r.Context(), l)
	s.writeBudget(w, r, func(context.Context) (*errand.SpendGuard, error) { return g, err })
}

func (s *Server) resumeBudget(w http.ResponseWriter, r *http.Request) {
	s.writeBudget(w, r, s.client.ResumeSpend)
}

// writeBudget answers with the guard change returns (nil: the guard as
// it is) and the running tasks.
func (s *Server) writeBudget(w http.ResponseWriter, r *http.Request, change func(context.Context) (*errand.SpendGuard, error)) {
	if change == nil {
		change = s.client.SpendGuard
	}
	g, err := change(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	running, err := s.client.List(r.Context(), &errand.ListParams{Statuses: []errand.Status{errand.StatusRunning}, Limit: runningListLimit})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sum := api.Summary(g, running.Tasks)
	sum.TimezoneName = zoneName(sum.Timezone, os.LookupEnv, os.Readlink)
	s.writeJSON(w, http.StatusOK, sum)
}
