package scheduler

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/validation"
	"github.com/errandhq/errand/store"
)

// fakeEngine is a scheduler.Engine of function fields; a nil field
// panics, so each test sets only what it means to reach.
type fakeEngine struct {
	Engine
	checkAgentFunc func(name string) error
}

func (f *fakeEngine) CheckAgent(name string) error { return f.checkAgentFunc(name) }

func TestCheckEscalation(t *testing.T) {
	t.Parallel()
	eng := &fakeEngine{checkAgentFunc: func(name string) error {
		switch name {
		case "oncall":
			return nil
		case "broken":
			return errors.New("agent config unreadable")
		}
		return validation.Unprocessable("agent", "no agent is named %q", name)
	}}
	s := New(nil, eng, nil)
	n := func(v int) *int { return &v }

	for _, tc := range []struct {
		name    string
		kind    string
		params  Params
		field   string // "" when accepted
		wantMax int
	}{
		{"none", store.ScheduleHeartbeat, Params{}, "", 0},
		{"default cap", store.ScheduleHeartbeat, Params{EscalateTo: "oncall"}, "", DefaultMaxEscalationsPerDay},
		{"own cap", store.ScheduleHeartbeat, Params{EscalateTo: "oncall", MaxEscalationsPerDay: n(0)}, "", 0},
		{"not a heartbeat", store.ScheduleCron, Params{EscalateTo: "oncall"}, "escalate_to", 0},
		{"cap on a cron", store.ScheduleCron, Params{MaxEscalationsPerDay: n(1)}, "max_escalations_per_day", 0},
		{"budget on a cron", store.ScheduleCron, Params{EscalationBudget: &store.Budget{}}, "escalation_budget", 0},
		{"cap out of range", store.ScheduleHeartbeat, Params{EscalateTo: "oncall", MaxEscalationsPerDay: n(1001)}, "max_escalations_per_day", 0},
		{"negative budget", store.ScheduleHeartbeat, Params{EscalateTo: "oncall", EscalationBudget: &store.Budget{MaxTokens: -1}}, "escalation_budget", 0},
		{"cap without agent", store.ScheduleHeartbeat, Params{MaxEscalationsPerDay: n(2)}, "escalate_to", 0},
		{"bad agent word", store.ScheduleHeartbeat, Params{EscalateTo: "on call"}, "escalate_to", 0},
		{"unknown agent", store.ScheduleHeartbeat, Params{EscalateTo: "ghost"}, "escalate_to", 0},
		{"agent check fails", store.ScheduleHeartbeat, Params{EscalateTo: "broken"}, "escalate_to", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			esc, err := s.checkEscalation(tc.kind, &tc.params)
			if tc.field != "" {
				var v *validation.Error
				require.ErrorAs(t, err, &v)
				require.Equal(t, tc.field, v.Field)
				return
			}
			require.NoError(t, err)
			if tc.params.EscalateTo == "" {
				require.Nil(t, esc)
				return
			}
			require.Equal(t, tc.wantMax, esc.MaxPerDay)
		})
	}
}
