package scheduler

import (
	"errors"

	"github.com/errandhq/errand/internal/validation"
	"github.com/errandhq/errand/store"
)

// DefaultMaxEscalationsPerDay is a heartbeat's daily cap of escalations
// when its schedule names escalate_to and no cap.
const DefaultMaxEscalationsPerDay = 3

// maxEscalationsPerDay bounds the cap a schedule may set.
const maxEscalationsPerDay = 1000

// checkEscalation checks a schedule's escalation settings and returns
// what the store keeps (nil: the heartbeat escalates nowhere).
func (s *Scheduler) checkEscalation(kind string, p *Params) (*store.ScheduleEscalation, error) {
	set := p.EscalateTo != "" || p.MaxEscalationsPerDay != nil || p.EscalationBudget != nil
	if set && kind != store.ScheduleHeartbeat {
		field := "escalate_to"
		switch {
		case p.EscalateTo != "":
		case p.MaxEscalationsPerDay != nil:
			field = "max_escalations_per_day"
		default:
			field = "escalation_budget"
		}
		return nil, validation.Invalid(field, "only a heartbeat schedule takes it")
	}
	if n := p.MaxEscalationsPerDay; n != nil && (*n < 0 || *n > maxEscalationsPerDay) {
		return nil, validation.Invalid("max_escalations_per_day", "%d is out of range 0–%d (0 forbids escalations)", *n, maxEscalationsPerDay)
	}
	if b := p.EscalationBudget; b != nil && (b.MaxTokens < 0 || b.MaxCostUSD < 0 || b.MaxWallClock < 0 || b.MaxToolCalls < 0) {
		return nil, validation.Invalid("escalation_budget", "limits must not be negative")
	}
	if p.EscalateTo == "" {
		if set {
			return nil, validation.Invalid("escalate_to", "is required with max_escalations_per_day or escalation_budget: the agent escalations go to")
		}
		return nil, nil
	}
	if err := checkWord("escalate_to", "an agent name", p.EscalateTo); err != nil {
		return nil, err
	}
	if err := s.eng.CheckAgent(p.EscalateTo); err != nil {
		var v *validation.Error
		if errors.As(err, &v) {
			out := *v
			out.Field = "escalate_to"
			return nil, &out
		}
		return nil, validation.Unprocessable("escalate_to", "%v", err)
	}
	esc := &store.ScheduleEscalation{To: p.EscalateTo, MaxPerDay: DefaultMaxEscalationsPerDay, Budget: p.EscalationBudget}
	if p.MaxEscalationsPerDay != nil {
		esc.MaxPerDay = *p.MaxEscalationsPerDay
	}
	return esc, nil
}
