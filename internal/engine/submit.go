package engine

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/errandhq/errand/internal/crashpoint"

	"github.com/errandhq/errand/internal/id"
	"github.com/errandhq/errand/internal/memory"
	"github.com/errandhq/errand/internal/validation"
	"github.com/errandhq/errand/store"
)

func invalid(field, format string, args ...any) *validation.Error {
	return validation.Invalid(field, format, args...)
}

func unprocessable(field, format string, args ...any) *validation.Error {
	return validation.Unprocessable(field, format, args...)
}

// SubmitParams is a task to submit. Goal is required; the rest is optional.
type SubmitParams struct {
	Goal     string
	Title    string // default: the goal's first line, shortened
	Agent    string // default "default"
	Input    json.RawMessage
	Metadata json.RawMessage
	Tags     []string
	Priority *int // 0–9, higher runs first; default 5
	ParentID string
	// DependsOn lists tasks that must complete before this one runs; until
	// then it is blocked. If one fails or is cancelled, this task fails
	// with dependency_failed, unless OnDependencyFailure is "run".
	DependsOn           []string
	OnDependencyFailure string
	SessionID           string
	RunAt               *time.Time // default now
	// MaxAttempts defaults to the engine's (5).
	MaxAttempts int
	// IdempotencyKey makes submits with the same key return the same task.
	IdempotencyKey string
	// Debounce collapses this submit with others of the same key (see
	// Debounce); nil: none.
	Debounce *Debounce
	// Budget limits what the task may consume; nil takes the engine's
	// default budget.
	Budget *store.Budget
	// MaxSteps, Tools, ToolsDeny and SystemPrompt override the agent's
	// settings for this task.
	MaxSteps     int
	Tools        []string
	ToolsDeny    []string
	SystemPrompt string
	// InputTimeout bounds how long a question the task asks stays open;
	// then it takes InputDefault, or without one the task fails with
	// input_timeout. Zero: questions never expire.
	InputTimeout time.Duration
	InputDefault *string
	// Source is who asked: user (default), agent, heartbeat,
	// schedule:<id> or event:<id>.
	Source string
	// ResultRoute is notify (default: a top-level task's outcome goes to
	// its session's inbox), silent (none is its old name), memory (the
	// result's output becomes a memory with the task's provenance) or
	// chain, with Chain naming the task that follows a completion.
	ResultRoute string
	Chain       *store.Chain
	// Scout marks a heartbeat scout (see store.Options.Scout).
	Scout bool
	// MaxMemoryTokens and MaxMemoryEntries bound what the task's recall
	// returns; 0 takes the limits of its source (see MemoryLimits).
	MaxMemoryTokens  int
	MaxMemoryEntries int
	// RecallFlagged lets the task recall quarantined memories.
	RecallFlagged bool
	// reviewsMemory allows the memory_review route: errand's own.
	reviewsMemory bool
	// Lane lets at most one task of the lane run at a time. With the
	// engine's SessionLanes, a top-level task with a session and no lane
	// takes the lane session:<session_id>.
	Lane string
	// ConcurrencyKey caps, with a limit in the config's concurrency map,
	// how many tasks holding it run at once (see
	// store.Options.ConcurrencyKey); empty: the task holds none.
	ConcurrencyKey string
	// Actor is recorded on the task.created event; default "user".
	Actor string
}

const maxTitleRunes = 80

// validate checks p and returns what to insert. The checks run in a fixed
// order: a request wrong in several fields always names the same one.
func (e *Engine) validate(p *SubmitParams) (*store.TaskInsertParams, error) {
	if err := checkGoal(p); err != nil {
		return nil, err
	}
	if err := checkRunAt(p); err != nil {
		return nil, err
	}
	input, err := jsonObject("input", p.Input, e.cfg.MaxInputBytes)
	if err != nil {
		return nil, err
	}
	metadata, err := jsonObject("metadata", p.Metadata, e.cfg.MaxInputBytes)
	if err != nil {
		return nil, err
	}
	priority, err := priorityOf(p)
	if err != nil {
		return nil, err
	}
	maxAttempts, err := e.maxAttemptsOf(p)
	if err != nil {
		return nil, err
	}
	for _, check := range []func(*SubmitParams) error{
		checkDependencies, checkParent, checkTags, checkLengths, checkBudget,
		checkAgentSettings, e.checkInputTimeout, checkSource, checkResultRoute,
		checkMemoryLimits, checkLane, checkConcurrencyKey, checkDebounce,
	} {
		if err := check(p); err != nil {
			return nil, err
		}
	}
	return &store.TaskInsertParams{
		ID:                  id.New(id.Task),
		ParentID:            p.ParentID,
		RunID:               id.New(id.Run),
		SessionID:           p.SessionID,
		Agent:               cmp.Or(p.Agent, DefaultAgent),
		Title:               cmp.Or(p.Title, defaultTitle(strings.TrimSpace(p.Goal))),
		Goal:                p.Goal,
		Input:               input,
		Metadata:            metadata,
		Tags:                p.Tags,
		Priority:            priority,
		MaxAttempts:         maxAttempts,
		RunAt:               p.RunAt,
		DependsOn:           p.DependsOn,
		OnDependencyFailure: p.OnDependencyFailure,
		IdempotencyKey:      p.IdempotencyKey,
		Debounce:            storeDebounce(p.Debounce),
		Budget:              cmp.Or(p.Budget, e.cfg.DefaultBudget),
		Options:             e.options(p),
		MaxDepth:            max(e.cfg.MaxSubtaskDepth, 0),
		Actor:               cmp.Or(p.Actor, store.ActorUser),
		Now:                 e.now(),
	}, nil
}

// checkGoal checks the goal and the title: text a person reads.
func checkGoal(p *SubmitParams) error {
	switch {
	case strings.TrimSpace(p.Goal) == "":
		return invalid("goal", "must not be empty")
	case len(p.Goal) > DefaultMaxGoalBytes:
		return invalid("goal", "is %d bytes; the limit is %d", len(p.Goal), DefaultMaxGoalBytes)
	case !utf8.ValidString(p.Goal):
		return invalid("goal", "must be valid UTF-8")
	}
	if err := checkText("goal", p.Goal); err != nil {
		return err
	}
	return checkText("title", p.Title)
}

// checkRunAt refuses a time the store cannot hold.
func checkRunAt(p *SubmitParams) error {
	if p.RunAt != nil && !store.TimeInRange(p.RunAt.UTC()) {
		return invalid("run_at", "%s is %s in UTC, outside the years 0001–9999", p.RunAt.Format(time.RFC3339Nano), p.RunAt.UTC().Format("2006-01-02T15:04:05Z07:00"))
	}
	return nil
}

// priorityOf is p's priority, DefaultPriority when absent.
func priorityOf(p *SubmitParams) (int, error) {
	if p.Priority == nil {
		return DefaultPriority, nil
	}
	if v := *p.Priority; v < 0 || v > 9 {
		return 0, invalid("priority", "%d is out of range 0–9", v)
	}
	return *p.Priority, nil
}

// maxAttemptsOf is p's attempt limit, the engine's when absent.
func (e *Engine) maxAttemptsOf(p *SubmitParams) (int, error) {
	n := cmp.Or(p.MaxAttempts, e.cfg.MaxAttempts)
	if n < 1 || n > 100 {
		return 0, invalid("max_attempts", "%d is out of range 1–100", n)
	}
	return n, nil
}

// checkDependencies checks depends_on (well-formed ids, each once) and
// what happens when one fails.
func checkDependencies(p *SubmitParams) error {
	if len(p.DependsOn) > DefaultMaxDependsOn {
		return invalid("depends_on", "has %d ids; the limit is %d", len(p.DependsOn), DefaultMaxDependsOn)
	}
	seen := make(map[string]bool, len(p.DependsOn))
	for _, d := range p.DependsOn {
		if !id.Valid(id.Task, d) {
			return invalid("depends_on", "%q is not a task id", d)
		}
		if seen[d] {
			return invalid("depends_on", "lists %s twice", d)
		}
		seen[d] = true
	}
	switch p.OnDependencyFailure {
	case "", store.OnDependencyFailureFail, store.OnDependencyFailureRun:
		return nil
	}
	return invalid("on_dependency_failure", "%q is not %q or %q", p.OnDependencyFailure,
		store.OnDependencyFailureFail, store.OnDependencyFailureRun)
}

func checkParent(p *SubmitParams) error {
	if p.ParentID != "" && !id.Valid(id.Task, p.ParentID) {
		return invalid("parent_id", "%q is not a task id", p.ParentID)
	}
	return nil
}

func checkTags(p *SubmitParams) error {
	for _, tag := range p.Tags {
		if strings.TrimSpace(tag) == "" || len(tag) > 100 {
			return invalid("tags", "each tag must be 1–100 bytes and not blank")
		}
	}
	if len(p.Tags) > 50 {
		return invalid("tags", "has %d tags; the limit is 50", len(p.Tags))
	}
	return nil
}

// checkLengths bounds the short strings, naming the first too long.
func checkLengths(p *SubmitParams) error {
	switch {
	case len(p.Title) > 1000:
		return invalid("title", "is too long")
	case len(p.SessionID) > 200:
		return invalid("session_id", "is too long")
	case len(p.IdempotencyKey) > 200:
		return invalid("idempotency_key", "is too long")
	case len(p.Agent) > 100:
		return invalid("agent", "is too long")
	}
	return nil
}

func checkBudget(p *SubmitParams) error {
	if b := p.Budget; b != nil && (b.MaxTokens < 0 || b.MaxCostUSD < 0 || b.MaxWallClock < 0 || b.MaxToolCalls < 0) {
		return invalid("budget", "limits must not be negative")
	}
	return nil
}

// checkAgentSettings checks what p overrides of its agent's settings.
func checkAgentSettings(p *SubmitParams) error {
	if p.MaxSteps < 0 || p.MaxSteps > 10_000 {
		return invalid("max_steps", "%d is out of range 1–10000", p.MaxSteps)
	}
	if len(p.SystemPrompt) > DefaultMaxGoalBytes {
		return invalid("system_prompt", "is %d bytes; the limit is %d", len(p.SystemPrompt), DefaultMaxGoalBytes)
	}
	if err := checkToolNames("tools", p.Tools); err != nil {
		return err
	}
	return checkToolNames("tools_deny", p.ToolsDeny)
}

func checkToolNames(field string, names []string) error {
	for _, n := range names {
		if strings.TrimSpace(n) == "" || len(n) > 100 {
			return invalid(field, "each tool name must be 1–100 bytes and not blank")
		}
	}
	return nil
}

// checkInputTimeout refuses a question deadline the store cannot hold.
func (e *Engine) checkInputTimeout(p *SubmitParams) error {
	if p.InputTimeout < 0 {
		return invalid("input_timeout", "must not be negative")
	}
	if !store.TimeInRange(e.clock.Now().UTC().Add(p.InputTimeout)) {
		return invalid("input_timeout", "%s reaches past the year 9999", p.InputTimeout)
	}
	return nil
}

func checkSource(p *SubmitParams) error {
	if !validSource(p.Source) {
		return invalid("source", "%q is not one of user, agent, heartbeat, schedule:<id>, event:<id>", p.Source)
	}
	return nil
}

// checkResultRoute checks the route's name against its chain; the chain
// itself is checkChain's.
func checkResultRoute(p *SubmitParams) error {
	switch p.ResultRoute {
	case "", store.ResultRouteNotify, store.ResultRouteSilent, store.ResultRouteNone, store.ResultRouteMemory:
		if p.Chain != nil {
			return invalid("result_route", "task, schedule and context_from_result belong to a chain route")
		}
		return nil
	case store.ResultRouteMemoryReview:
		if p.reviewsMemory {
			return nil
		}
	case store.ResultRouteChain:
		if p.Chain == nil {
			return invalid("result_route", `a chain names either "task" or "schedule"`)
		}
		return nil
	}
	return invalid("result_route", "%q is not one of notify, silent, none, memory, chain", p.ResultRoute)
}

func checkMemoryLimits(p *SubmitParams) error {
	if p.MaxMemoryTokens < 0 || p.MaxMemoryTokens > memory.MaxTokensLimit {
		return invalid("max_memory_tokens", "%d is out of range 0–%d", p.MaxMemoryTokens, memory.MaxTokensLimit)
	}
	if p.MaxMemoryEntries < 0 || p.MaxMemoryEntries > memory.MaxEntriesLimit {
		return invalid("max_memory_entries", "%d is out of range 0–%d", p.MaxMemoryEntries, memory.MaxEntriesLimit)
	}
	return nil
}

func checkLane(p *SubmitParams) error {
	if err := checkText("lane", p.Lane); err != nil {
		return err
	}
	if len(p.Lane) > 200 {
		return invalid("lane", "is %d bytes; the limit is 200", len(p.Lane))
	}
	return nil
}

// maxConcurrencyKeyBytes bounds a concurrency key, like a lane.
const maxConcurrencyKeyBytes = 200

func checkConcurrencyKey(p *SubmitParams) error {
	if err := checkText("concurrency_key", p.ConcurrencyKey); err != nil {
		return err
	}
	if len(p.ConcurrencyKey) > maxConcurrencyKeyBytes {
		return invalid("concurrency_key", "is %d bytes; the limit is %d", len(p.ConcurrencyKey), maxConcurrencyKeyBytes)
	}
	// Agent keys are held by an agent's tasks already; a task naming one
	// as its own would look limited and not be.
	if _, ok := store.KeyAgent(p.ConcurrencyKey); ok {
		return invalid("concurrency_key", "%q: keys starting with %q are the agents' own (every task holds agent:<its agent>); choose another key", p.ConcurrencyKey, store.AgentKeyPrefix)
	}
	return nil
}

// options are the task's own settings for its agent, nil when it has
// none. With SessionLanes, a top-level task with a session and no lane
// takes its session's.
func (e *Engine) options(p *SubmitParams) *store.Options {
	lane := p.Lane
	if lane == "" && e.cfg.SessionLanes && p.SessionID != "" && p.ParentID == "" {
		lane = "session:" + p.SessionID
	}
	if p.MaxSteps == 0 && len(p.Tools) == 0 && len(p.ToolsDeny) == 0 && p.SystemPrompt == "" && p.InputTimeout <= 0 && p.InputDefault == nil &&
		p.Source == "" && p.ResultRoute == "" && !p.Scout && lane == "" && p.ConcurrencyKey == "" && p.MaxMemoryTokens <= 0 && p.MaxMemoryEntries <= 0 && !p.RecallFlagged {
		return nil
	}
	return &store.Options{
		MaxSteps: p.MaxSteps, Tools: p.Tools, ToolsDeny: p.ToolsDeny, SystemPrompt: p.SystemPrompt,
		InputTimeout: store.Duration(p.InputTimeout), InputDefault: p.InputDefault,
		Source: p.Source, ResultRoute: p.ResultRoute, Chain: p.Chain, Scout: p.Scout, Lane: lane, ConcurrencyKey: p.ConcurrencyKey,
		MaxMemoryTokens: p.MaxMemoryTokens, MaxMemoryEntries: p.MaxMemoryEntries, RecallFlagged: p.RecallFlagged,
	}
}

// validSource reports whether s names who asked for a task.
func validSource(s string) bool {
	switch s {
	case "", store.SourceUser, store.SourceAgent, store.SourceHeartbeat, store.SourceSchedule, store.SourceEvent:
		return true
	}
	kind, rest, ok := strings.Cut(s, ":")
	return ok && rest != "" && len(rest) <= 100 && (kind == store.SourceSchedule || kind == store.SourceEvent)
}

// checkText refuses text a person reads that carries control characters
// other than tab and newline (validation.CheckText).
func checkText(field, s string) error { return validation.CheckText(field, s) }

// jsonObject checks that raw, if present, is one JSON object within limit
// bytes, and returns it compacted ({} when absent).
func jsonObject(field string, raw json.RawMessage, limit int) (json.RawMessage, error) {
	if len(raw) == 0 {
		return json.RawMessage(`{}`), nil
	}
	if len(raw) > limit {
		return nil, invalid(field, "is %d bytes; the limit is %d", len(raw), limit)
	}
	if !json.Valid(raw) {
		var v any
		err := json.Unmarshal(raw, &v)
		return nil, invalid(field, "is not valid JSON: %v", err)
	}
	trimmed := bytes.TrimSpace(raw)
	if trimmed[0] != '{' {
		return nil, invalid(field, "must be a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, trimmed); err != nil {
		return nil, invalid(field, "is not valid JSON: %v", err)
	}
	return buf.Bytes(), nil
}

func defaultTitle(goal string) string {
	line, _, _ := strings.Cut(goal, "\n")
	if utf8.RuneCountInString(line) <= maxTitleRunes {
		return line
	}
	r := []rune(line)
	return string(r[:maxTitleRunes-1]) + "…"
}

// Submit validates p and stores a new task, or returns the task that
// already has p's idempotency key. A bad request is a *validation.Error and
// nothing is written.
func (e *Engine) Submit(ctx context.Context, p *SubmitParams) (*store.Task, error) {
	t, _, err := e.SubmitResult(ctx, p)
	return t, err
}

// SubmitResult is Submit that also says whether the task was written
// (false: p's idempotency key named an existing task, which is returned).
func (e *Engine) SubmitResult(ctx context.Context, p *SubmitParams) (*store.Task, bool, error) {
	res, err := e.SubmitInsert(ctx, p)
	if err != nil {
		return nil, false, err
	}
	return res.Task, res.Inserted, nil
}

// SubmitInsert is Submit that also says whether the task was written, or
// collapsed into the waiting task with its debounce key (Debounced).
func (e *Engine) SubmitInsert(ctx context.Context, p *SubmitParams) (*store.TaskInsertResult, error) {
	params, err := e.validate(p)
	if err != nil {
		return nil, err
	}
	if err := e.checkChain(ctx, p, 0); err != nil {
		return nil, err
	}
	res, err := e.store.TaskInsert(ctx, params)
	if err != nil {
		var ref *store.ReferenceError
		if errors.As(err, &ref) {
			return nil, unprocessable(ref.Field, "task %s does not exist", ref.ID)
		}
		var deep *store.DepthError
		if errors.As(err, &deep) {
			return nil, unprocessable("parent_id", "%s", deep.Reason())
		}
		return nil, fmt.Errorf("submit: %w", err)
	}
	if res.Inserted {
		crashpoint.Hit(crashpoint.TaskInsertCommitted)
	}
	if res.Inserted || res.Debounced {
		e.madeReady()
	}
	return res, nil
}
