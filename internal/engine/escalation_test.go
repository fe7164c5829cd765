package engine

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/scheduler"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/internal/validation"
	"github.com/errandhq/errand/store"
)

// knownAgents makes the engine refuse agents other than names.
func knownAgents(e *Engine, names ...string) {
	e.cfg.CheckAgent = func(name string) error {
		for _, n := range names {
			if n == name {
				return nil
			}
		}
		return unprocessable("agent", "%q is not a registered agent", name)
	}
}

func intp(n int) *int { return &n }

// A heartbeat's escalation settings: checked, defaulted, patched, and
// only for heartbeats.
func TestEscalationSettings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	knownAgents(b.engine, DefaultAgent, "scout", "oncall")
	ctx := context.Background()
	heartbeat := func(p scheduler.Params) *scheduler.Params {
		p.Kind, p.Task = "heartbeat", json.RawMessage(`{"goal": "Look", "agent": "scout"}`)
		return &p
	}
	for _, tc := range []struct {
		name  string
		p     *scheduler.Params
		field string
	}{
		{"unknown agent", heartbeat(scheduler.Params{Name: "a", EscalateTo: "ghost"}), "escalate_to"},
		{"negative cap", heartbeat(scheduler.Params{Name: "b", EscalateTo: "oncall", MaxEscalationsPerDay: intp(-1)}), "max_escalations_per_day"},
		{"cap without agent", heartbeat(scheduler.Params{Name: "c", MaxEscalationsPerDay: intp(2)}), "escalate_to"},
		{"negative budget", heartbeat(scheduler.Params{Name: "d", EscalateTo: "oncall", EscalationBudget: &store.Budget{MaxCostUSD: -1}}), "escalation_budget"},
		{"not a heartbeat", &scheduler.Params{Name: "e", Kind: "interval", Spec: "1m", EscalateTo: "oncall",
			Task: json.RawMessage(`{"goal": "x"}`)}, "escalate_to"},
	} {
		_, err := b.engine.Scheduler().Create(ctx, tc.p)
		var v *validation.Error
		require.ErrorAs(t, err, &v, tc.name)
		require.Equal(t, tc.field, v.Field, tc.name)
	}

	sc := createSchedule(t, b.engine, heartbeat(scheduler.Params{Name: "watch", EscalateTo: "oncall"}))
	require.Equal(t, &store.ScheduleEscalation{To: "oncall", MaxPerDay: scheduler.DefaultMaxEscalationsPerDay}, sc.Escalation)
	sc, err := b.engine.Scheduler().Update(ctx, "watch", &scheduler.Patch{MaxEscalationsPerDay: intp(0), EscalationBudget: &store.Budget{MaxCostUSD: 1}})
	require.NoError(t, err)
	require.Equal(t, &store.ScheduleEscalation{To: "oncall", MaxPerDay: 0, Budget: &store.Budget{MaxCostUSD: 1}}, sc.Escalation)
	sc, err = b.engine.Scheduler().Update(ctx, "watch", &scheduler.Patch{Spec: new("5m")})
	require.NoError(t, err)
	require.NotNil(t, sc.Escalation, "a patch of something else keeps it")
	sc, err = b.engine.Scheduler().Update(ctx, "watch", &scheduler.Patch{EscalateTo: new("")})
	require.NoError(t, err)
	require.Nil(t, sc.Escalation, "an empty escalate_to removes it")
}

// escalatingScout is a scout that escalates n signals, for a pool.
func escalatingScout(n int) taskrun.Handler {
	return taskrun.HandlerFunc(func(context.Context, taskrun.Run) (taskrun.Result, error) {
		var sigs []map[string]any
		for i := range n {
			sigs = append(sigs, map[string]any{"severity": []string{"critical", "low", "medium"}[i%3],
				"summary": "disk filling on db-" + string(rune('1'+i)), "evidence": []string{"df: 97%"}, "suggested_agent": "dba"})
		}
		out, _ := json.Marshal(map[string]any{"decision": "escalate", "reason": "the disk", "escalations": sigs,
			"alerts": []string{"disk"}})
		return taskrun.Result{Output: out}, nil
	})
}

type escalationResult struct {
	Output struct {
		Decision    string `json:"decision"`
		EscalateTo  string `json:"escalate_to"`
		Escalations []struct {
			Severity       string `json:"severity"`
			SuggestedAgent string `json:"suggested_agent"`
			TaskID         string `json:"task_id"`
			Capped         bool   `json:"capped"`
			Refused        string `json:"refused"`
		} `json:"escalations"`
	} `json:"output"`
}

func scoutResult(t *testing.T, e *Engine, id string) escalationResult {
	t.Helper()
	waitForStatus(t, e, id, store.StatusCompleted)
	got, err := e.Get(context.Background(), id)
	require.NoError(t, err)
	var res escalationResult
	require.NoError(t, json.Unmarshal(got.Result, &res), "%s", got.Result)
	return res
}

// A scout's escalations become tasks for the schedule's escalate_to, with
// the signal as input, under the escalation budget, in the transaction
// that completes the scout; beyond the day's cap they are recorded as
// capped and an alert says so; the next UTC day counts afresh.
func TestEscalationMadeAndCapped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.clock.Set(time.Date(2026, 5, 6, 22, 0, 0, 0, time.UTC))
	knownAgents(b.engine, DefaultAgent, "scout", "oncall", "dba")
	ctx := context.Background()
	startPool(t, b.engine, &PoolConfig{Schedules: true, Handlers: map[string]taskrun.Handler{"scout": escalatingScout(2)}})
	sc := createSchedule(t, b.engine, &scheduler.Params{
		Name: "watch", Kind: "heartbeat", EscalateTo: "oncall", MaxEscalationsPerDay: intp(3), Enabled: new(false), // run by hand only
		EscalationBudget: &store.Budget{MaxCostUSD: 0.75, MaxToolCalls: 30},
		Task:             json.RawMessage(`{"goal": "Look", "agent": "scout", "session_id": "ops"}`),
	})

	scout, err := b.engine.Scheduler().RunNow(ctx, sc.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"id": "`+sc.ID+`", "name": "watch"}`, string(mustJSON(scoutWorldOf(t, scout).Schedule)))
	require.Equal(t, "oncall", scoutWorldOf(t, scout).EscalateTo, "the scout is told where escalations go")
	res := scoutResult(t, b.engine, scout.ID)
	require.Equal(t, "escalate", res.Output.Decision)
	require.Equal(t, "oncall", res.Output.EscalateTo)
	require.Len(t, res.Output.Escalations, 2)
	first := res.Output.Escalations[0]
	require.NotEmpty(t, first.TaskID)
	require.Equal(t, "dba", first.SuggestedAgent, "recorded, not obeyed")

	esc, err := b.engine.Get(ctx, first.TaskID)
	require.NoError(t, err)
	require.Equal(t, "oncall", esc.Agent)
	require.Equal(t, "ops", esc.SessionID)
	require.Equal(t, 9, esc.Priority, "critical")
	require.Equal(t, &store.Budget{MaxCostUSD: 0.75, MaxToolCalls: 30}, esc.Budget)
	require.Equal(t, store.SourceSchedule+":"+sc.ID, esc.Options.Source)
	require.Contains(t, esc.Goal, "Escalation (critical) from heartbeat watch")
	require.JSONEq(t, `{"escalation": {"severity": "critical", "summary": "disk filling on db-1", "evidence": ["df: 97%"],
		"suggested_agent": "dba"}, "heartbeat": {"schedule": {"id": "`+sc.ID+`", "name": "watch"}, "scout_task_id": "`+scout.ID+`"}}`,
		string(esc.Input))

	// The journal names the escalated tasks on the scout.
	decided := eventsOfType(t, b.engine, store.EventHeartbeatDecision)
	require.Len(t, decided, 1)
	require.Equal(t, scout.ID, decided[0].TaskID)
	require.Contains(t, string(decided[0].Data), first.TaskID)

	// The second scout of the day: one more is made, one capped, and an
	// alert says so.
	scout, err = b.engine.Scheduler().RunNow(ctx, sc.ID)
	require.NoError(t, err)
	res = scoutResult(t, b.engine, scout.ID)
	require.NotEmpty(t, res.Output.Escalations[0].TaskID)
	require.Empty(t, res.Output.Escalations[1].TaskID)
	require.True(t, res.Output.Escalations[1].Capped)
	require.Len(t, tasksBySource(t, b.engine, store.SourceSchedule+":"+sc.ID), 3)
	alerts := eventsOfType(t, b.engine, store.EventAlert)
	var capped int
	for _, a := range alerts {
		if a.TaskID == scout.ID && json.Valid(a.Data) && strings.Contains(string(a.Data), "today's cap of 3") {
			capped++
		}
	}
	require.Equal(t, 1, capped, "an alert says the cap held: %v", alerts)

	// After midnight UTC the count starts again.
	b.clock.Advance(3 * time.Hour)
	scout, err = b.engine.Scheduler().RunNow(ctx, sc.ID)
	require.NoError(t, err)
	res = scoutResult(t, b.engine, scout.ID)
	require.NotEmpty(t, res.Output.Escalations[0].TaskID)
	require.NotEmpty(t, res.Output.Escalations[1].TaskID)
	require.Len(t, tasksBySource(t, b.engine, store.SourceSchedule+":"+sc.ID), 5)
}

func scoutWorldOf(t *testing.T, task *store.Task) scheduler.ScoutWorld {
	t.Helper()
	var in struct {
		Heartbeat scheduler.ScoutWorld `json:"heartbeat"`
	}
	require.NoError(t, json.Unmarshal(task.Input, &in))
	return in.Heartbeat
}

// A heartbeat without escalate_to makes no escalation: the scout's
// signals are recorded as refused and an alert says why; a signal that
// does not hold fails the scout as a bad decision.
func TestEscalationRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	bad := make(chan bool, 1)
	startPool(t, b.engine, &PoolConfig{Schedules: true, Handlers: map[string]taskrun.Handler{
		"scout": taskrun.HandlerFunc(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
			if <-bad {
				return taskrun.Result{Output: json.RawMessage(`{"decision": "escalate", "escalations": [{"severity": "dire", "summary": "x"}]}`)}, nil
			}
			return escalatingScout(1).Handle(ctx, r)
		}),
	}})
	sc := createSchedule(t, b.engine, &scheduler.Params{Name: "watch", Kind: "heartbeat", Task: json.RawMessage(`{"goal": "Look", "agent": "scout"}`)})
	bad <- false
	scout, err := b.engine.Scheduler().RunNow(ctx, sc.ID)
	require.NoError(t, err)
	require.Empty(t, scoutWorldOf(t, scout).EscalateTo)
	res := scoutResult(t, b.engine, scout.ID)
	require.Equal(t, "heartbeat watch has no escalate_to", res.Output.Escalations[0].Refused)
	require.Empty(t, tasksBySource(t, b.engine, store.SourceSchedule+":"+sc.ID))
	var said bool
	for _, a := range eventsOfType(t, b.engine, store.EventAlert) {
		said = said || strings.Contains(string(a.Data), "no escalate_to")
	}
	require.True(t, said)

	bad <- true
	scout, err = b.engine.Scheduler().RunNow(ctx, sc.ID)
	require.NoError(t, err)
	waitForStatus(t, b.engine, scout.ID, store.StatusFailed)
	got, err := b.engine.Get(ctx, scout.ID)
	require.NoError(t, err)
	require.Equal(t, CodeBadDecision, got.Error.Code)
	require.Contains(t, got.Error.Message, "severity")
}

// Two engines on one database, each completing scouts of one heartbeat at
// once, make no more escalations than its daily cap between them.
func TestEscalationCapTwoEngines(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, other := b.openEngine(t)
	ctx := context.Background()
	release := make(chan struct{})
	var started sync.WaitGroup
	scoutHandler := taskrun.HandlerFunc(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		started.Done()
		<-release // every scout finishes at once
		return escalatingScout(1).Handle(ctx, r)
	})
	const scouts, maxPerDay = 6, 2
	started.Add(scouts)
	for _, e := range []*Engine{b.engine, other} {
		startPool(t, e, &PoolConfig{Workers: scouts, Handlers: map[string]taskrun.Handler{"scout": scoutHandler}})
	}
	sc := createSchedule(t, b.engine, &scheduler.Params{Name: "watch", Kind: "heartbeat", EscalateTo: "oncall",
		MaxEscalationsPerDay: intp(maxPerDay), Overlap: "allow_all", Task: json.RawMessage(`{"goal": "Look", "agent": "scout"}`)})
	var ids []string
	for range scouts {
		task, err := b.engine.Scheduler().RunNow(ctx, sc.ID)
		require.NoError(t, err)
		ids = append(ids, task.ID)
	}
	started.Wait()
	close(release)
	var made, capped int
	for _, id := range ids {
		for _, e := range scoutResult(t, b.engine, id).Output.Escalations {
			switch {
			case e.TaskID != "":
				made++
			case e.Capped:
				capped++
			default:
				require.Fail(t, "neither made nor capped", "%+v", e)
			}
		}
	}
	require.Equal(t, maxPerDay, made)
	require.Equal(t, scouts-maxPerDay, capped)
	require.Len(t, tasksBySource(t, b.engine, store.SourceSchedule+":"+sc.ID), maxPerDay)
}

// parseDecision's rules for escalations: escalate is inferred and takes
// precedence; a decision that names another kind with escalations, or an
// escalate without one, does not hold.
func TestParseDecisionEscalations(t *testing.T) {
	t.Parallel()
	d, err := parseDecision(json.RawMessage(`{"tasks": [{"goal": "x"}], "escalations": [{"severity": "low", "summary": "s"}]}`))
	require.NoError(t, err)
	require.Equal(t, taskrun.DecisionEscalate, d.Decision)
	for _, bad := range []string{
		`{"decision": "submit_task", "tasks": [{"goal": "x"}], "escalations": [{"severity": "low", "summary": "s"}]}`,
		`{"decision": "escalate"}`,
		`{"decision": "noop", "escalations": [{"severity": "low", "summary": "s"}]}`,
	} {
		_, err := parseDecision(json.RawMessage(bad))
		require.Error(t, err, bad)
	}
}
