package store

import (
	"context"
	"strings"
	"time"
)

// AgentKeyPrefix starts the concurrency key that limits an agent: the
// tasks of agent NAME all hold the key "agent:NAME".
const AgentKeyPrefix = "agent:"

// AgentKey is the concurrency key of an agent's tasks.
func AgentKey(agent string) string { return AgentKeyPrefix + agent }

// KeyAgent is the agent an agent key names; false for any other key.
func KeyAgent(key string) (string, bool) {
	return strings.CutPrefix(key, AgentKeyPrefix)
}

// FlowStore is the flow control a store keeps for every daemon it serves:
// agents paused, the tasks each agent and concurrency key holds, and the
// token buckets of provider rate limits.
//
// Concurrency limits themselves are enforced by TaskLeaseMany (see
// TaskLeaseManyParams.Limits).
type FlowStore interface {
	// AgentPauseSet pauses or resumes an agent: while paused, no claim
	// takes its tasks. It reports whether anything changed (pausing a
	// paused agent does not).
	AgentPauseSet(ctx context.Context, params *AgentPauseSetParams) (changed bool, err error)

	// AgentPauseList lists the paused agents, by name.
	AgentPauseList(ctx context.Context) ([]*AgentPause, error)

	// FlowStats counts, per agent and per concurrency key (a task's own
	// key, not agent keys), the tasks running and the tasks ready or
	// waiting to be (pending or retry_scheduled), and the ready tasks
	// deferred for a rate limit (their progress label starts with
	// RateLimitLabel).
	FlowStats(ctx context.Context) (*FlowStats, error)

	// RateLimitTake takes Requests requests and Tokens tokens from the
	// buckets of a model shared by every daemon of the store. Each refills
	// at its per-minute limit; the request bucket holds one request, so
	// calls are evenly spaced and every minute-long window stays within the
	// limit (a minute's worth of requests, plus their refill, could send
	// twice it), and the token bucket holds a minute's tokens. It takes
	// all or nothing: when either bucket lacks what is asked it takes none
	// and returns how long until both would hold it, from what they hold
	// now. A limit of 0 is no limit. Asking more than a bucket holds
	// (tokens beyond a minute's limit, more than one request) is served
	// once it is full, leaving it in debt. With Reserve, a take the
	// buckets would serve within Reserve is made at once, into debt, and
	// the wait returned (at most Reserve) is how long the caller must hold
	// its call: later takes queue behind it.
	RateLimitTake(ctx context.Context, params *RateLimitTakeParams) (wait time.Duration, err error)

	// RateLimitAdjust corrects a model's token bucket once a call's real
	// use is known: Tokens > 0 gives tokens back (the call used less than
	// it took), Tokens < 0 takes more (the bucket may go into debt).
	RateLimitAdjust(ctx context.Context, params *RateLimitAdjustParams) error
}

// AgentPauseSetParams pauses (Paused) or resumes an agent.
type AgentPauseSetParams struct {
	Agent  string
	Paused bool
	Actor  string
	Now    *time.Time
}

// AgentPause is one paused agent.
type AgentPause struct {
	Agent    string    `json:"agent"`
	Actor    string    `json:"actor"`
	PausedAt time.Time `json:"paused_at"`
}

// RateLimitLabel starts the progress label of a task waiting for a
// model's rate limit, in place or deferred.
const RateLimitLabel = "waiting for the model provider's rate limit"

// FlowCount is what one agent or key holds.
type FlowCount struct {
	Running int `json:"running"`
	Pending int `json:"pending"`
	// RateLimited counts the pending tasks deferred for a rate limit.
	RateLimited int `json:"rate_limited"`
}

// FlowStats is FlowCount by agent and by concurrency key; absent means
// zero.
type FlowStats struct {
	Agents map[string]FlowCount `json:"agents"`
	Keys   map[string]FlowCount `json:"keys"`
}

// RateLimit is a model's allowance per minute; 0 is no limit.
type RateLimit struct {
	RequestsPerMinute int `json:"requests_per_minute,omitempty" yaml:"requests_per_minute"`
	TokensPerMinute   int `json:"tokens_per_minute,omitempty" yaml:"tokens_per_minute"`
}

// RateLimitTakeParams asks a model's buckets for one call's allowance.
type RateLimitTakeParams struct {
	Model    string
	Limit    RateLimit
	Requests int
	Tokens   int64
	// Reserve takes what would be served within it now (see
	// RateLimitTake); 0 takes only what the buckets hold.
	Reserve time.Duration
	Now     *time.Time
}

// RateLimitAdjustParams corrects a model's token bucket.
type RateLimitAdjustParams struct {
	Model  string
	Limit  RateLimit
	Tokens int64
	Now    *time.Time
}
