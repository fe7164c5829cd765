// Package config loads errand.yaml, the daemon's configuration file, and the
// ERRAND_* environment variables that override it.
//
// Every key is optional. A key that is absent, or set to null, keeps its
// default; a key that is present is taken literally, so "workers: 0" is an
// error rather than a silent 4, and "max_subtask_depth: 0" forbids subtasks.
// Decoding is strict: an unknown key at any depth is an error naming the key
// and its line, so a typo never passes for a default.
//
// The order is: file (Parse, LoadFile), then environment (ApplyEnv), then
// command-line flags (set by the caller), then Validate. Every error found is
// reported at once, each a *FieldError naming the key path
// ("agents.shell.command") or the environment variable; a config with an
// error is never returned.
package config

import (
	"time"

	"go.yaml.in/yaml/v3"
)

// FileName is the config file's name inside $ERRAND_HOME.
const FileName = "errand.yaml"

// Defaults of Config.
const (
	DefaultListen            = "127.0.0.1:7780"
	DefaultStore             = StoreSQLite
	DefaultDurability        = DurabilityNormal
	DefaultWorkers           = 4
	DefaultLeaseTTL          = Duration(90 * time.Second)
	DefaultMaxSubtaskDepth   = 3
	DefaultHeartbeatInterval = Duration(30 * time.Second)
	DefaultRetention         = Duration(720 * time.Hour)
	DefaultOnLimit           = OnLimitPauseAll
	DefaultDailyUSD          = 5.00
	DefaultMonthlyUSD        = 50.00
	DefaultOnAgentChange     = OnAgentChangeContinue
)

// Defaults of Agent.
const (
	DefaultMaxSteps    = 20
	DefaultStepTimeout = Duration(120 * time.Second)
	DefaultProvider    = ProviderOpenAI
	DefaultMode        = ModeReact
)

// DefaultAlertThresholds returns the default budget.alert_thresholds: warn at
// 50%, 80% and 90% of a daily or monthly limit.
func DefaultAlertThresholds() []float64 { return []float64{0.5, 0.8, 0.9} }

// StoreSQLite is the store value meaning $ERRAND_HOME/errand.db.
const StoreSQLite = "sqlite"

// Values of Config.Durability.
const (
	// DurabilityNormal survives a crash of the process; power loss may lose
	// the last transactions.
	DurabilityNormal = "normal"
	// DurabilityFull survives power loss too, at the cost of an fsync per
	// commit.
	DurabilityFull = "full"
)

// Values of Agent.Kind.
const (
	KindLLM  = "llm"
	KindExec = "exec"
	KindA2A  = "a2a"
)

// Values of Agent.Provider.
const (
	// ProviderOpenAI is any server speaking OpenAI-compatible chat
	// completions: OpenAI, Ollama, vLLM, llama.cpp server.
	ProviderOpenAI = "openai"
	// ProviderAnthropic is the Anthropic Messages API.
	ProviderAnthropic = "anthropic"
)

// Values of Agent.Mode.
const (
	ModeReact       = "react"
	ModePlanExecute = "plan_execute"
)

// Values of Config.OnAgentChange: what a task resumed under a changed
// definition of its agent does, once task.agent_changed is journaled.
const (
	// OnAgentChangeContinue goes on under the new definition.
	OnAgentChangeContinue = "continue"
	// OnAgentChangeFail fails the task with code agent_changed.
	OnAgentChangeFail = "fail"
)

// Values of Budget.OnLimit.
const (
	// OnLimitPauseAll stops claiming any task until the period ends.
	OnLimitPauseAll = "pause-all"
	// OnLimitPauseNonCritical stops claiming all but critical tasks.
	OnLimitPauseNonCritical = "pause-non-critical"
	// OnLimitAlertOnly only emits the budget events.
	OnLimitAlertOnly = "alert-only"
)

// Config is errand.yaml. Build one with Default, Parse, LoadFile or Load;
// the zero Config is not valid.
type Config struct {
	// Listen is the HTTP address, host:port; default 127.0.0.1:7780.
	Listen string `yaml:"listen"`
	// Store is "sqlite" (default; $ERRAND_HOME/errand.db), a SQLite path or
	// sqlite:// URL, or a postgres:// URL. See StoreDSN.
	Store string `yaml:"store"`
	// Durability of the SQLite store: "normal" (default) or "full". Ignored
	// by PostgreSQL.
	Durability string `yaml:"durability"`
	// Workers is how many tasks this process runs at once; default 4, at
	// least 1.
	Workers int `yaml:"workers"`
	// LeaseTTL is how long a worker holds a task without renewing; default
	// 90s, at least 1s. Expired leases are recovered every LeaseTTL/2.
	LeaseTTL Duration `yaml:"lease_ttl"`
	// MaxSubtaskDepth bounds the subtask tree below a top-level task;
	// default 3, 0 forbids subtasks.
	MaxSubtaskDepth int `yaml:"max_subtask_depth"`
	// HeartbeatInterval is how often the daemon rewrites heartbeat.json;
	// default 30s, at least 1s. The daemon is stale after 3 intervals.
	HeartbeatInterval Duration `yaml:"heartbeat_interval"`
	// Agents are the named agents tasks can ask for. Default none.
	Agents map[string]Agent `yaml:"agents"`
	// Pricing is USD per million tokens, by model name.
	Pricing map[string]Price `yaml:"pricing"`
	// RateLimits are each model's requests and tokens per minute, shared
	// by every agent and daemon that calls it.
	RateLimits map[string]RateLimit `yaml:"rate_limits"`
	// Concurrency caps how many tasks holding a concurrency key run at
	// once across every daemon of the store; "agent:NAME" keys cap an
	// agent. A key not listed is unlimited.
	Concurrency map[string]int `yaml:"concurrency"`
	// Budget limits spend per task and per day and month.
	Budget Budget `yaml:"budget"`
	// Webhooks receive events as signed HTTP POSTs.
	Webhooks []Webhook `yaml:"webhooks"`
	// MCPServers are MCP servers whose tools agents may call, by name.
	MCPServers map[string]MCPServer `yaml:"mcp_servers"`
	// Retention is how long finished tasks are kept; default 720h (30
	// days), 0 keeps them forever.
	Retention Duration `yaml:"retention"`
	// MemoryRetention is how long memories are kept; default 0, forever.
	// Purging tasks never removes their memories.
	MemoryRetention Duration `yaml:"memory_retention"`
	// MemoryLimits bound what recall returns to a task, by where the task
	// came from; a task may set its own.
	MemoryLimits MemoryLimits `yaml:"memory_limits"`
	// Memory sets how far memories are trusted: decay, the confidence
	// floor, embeddings and the classifier agent.
	Memory Memory `yaml:"memory"`
	// Lanes is "session" to run at most one top-level task per session at
	// a time, or empty (or "none") for no lanes. A task's own lane applies
	// either way.
	Lanes string `yaml:"lanes"`
	// OnAgentChange is what a task does when it resumes, its recorded work
	// done under another definition of its agent (kind, model, prompt,
	// tools, MCP servers…): "continue" (default) or "fail".
	OnAgentChange string `yaml:"on_agent_change"`
	// Schedules are the schedules the file declares, by name: applied at
	// start and on SIGHUP. Default none.
	Schedules map[string]Schedule `yaml:"schedules"`
	// Auth is how API clients prove who they are.
	Auth Auth `yaml:"auth"`
	// A2A configures the A2A server at /a2a.
	A2A A2A `yaml:"a2a"`
	// Telemetry exports OpenTelemetry traces; off unless an endpoint is
	// set here or in OTEL_EXPORTER_OTLP_ENDPOINT.
	Telemetry Telemetry `yaml:"telemetry"`
}

// Protocols of Telemetry.
const (
	TelemetryHTTP = "http"
	TelemetryGRPC = "grpc"
)

// Telemetry configures the export of OpenTelemetry traces. Each empty key
// takes the standard OTEL_* variable, which the file's key overrides.
type Telemetry struct {
	// OTLPEndpoint is the collector's base URL, e.g.
	// http://localhost:4318 (http) or http://localhost:4317 (grpc); http
	// sends to its path /v1/traces. Empty: OTEL_EXPORTER_OTLP_ENDPOINT,
	// and without either no traces are exported.
	OTLPEndpoint string `yaml:"otlp_endpoint,omitempty"`
	// Protocol is http (OTLP/HTTP protobuf, the default) or grpc.
	Protocol string `yaml:"protocol,omitempty"`
	// ServiceName is the service.name of every span; default errand.
	ServiceName string `yaml:"service_name,omitempty"`
	// SampleRatio is the share of runs traced, 0 to 1 (default 1); a run
	// whose submit carried a traceparent follows its caller's decision.
	SampleRatio *float64 `yaml:"sample_ratio,omitempty"`
}

// RateLimit is a model's allowance per minute; 0 is no limit.
type RateLimit struct {
	RequestsPerMinute int `yaml:"requests_per_minute"`
	TokensPerMinute   int `yaml:"tokens_per_minute"`
}

// A2A configures the A2A server.
type A2A struct {
	// BaseURL is where A2A clients reach errand, written into the agent
	// card (behind a proxy, say); empty builds it from each request.
	BaseURL string `yaml:"base_url,omitempty"`
	// DefaultAgent runs messages that name no agent; empty: the agent
	// named default, else the only agent configured.
	DefaultAgent string `yaml:"default_agent,omitempty"`
	// PushAllowPrivate lets push-notification configs name loopback and
	// private addresses (tests, a LAN); default false.
	PushAllowPrivate bool `yaml:"push_allow_private,omitempty"`
}

// Auth configures the API's bearer token. Every /api route and the
// WebSocket require it; /healthz never does.
type Auth struct {
	// TokenEnv names the environment variable holding the token. Empty
	// (the default) uses $ERRAND_HOME/token, created with a random token
	// on first start. Required to listen on a non-loopback address, so
	// that remote clients have a token someone chose to share.
	TokenEnv string `yaml:"token_env,omitempty"`
	// ProtectMetrics puts /metrics behind the token too; default false.
	ProtectMetrics bool `yaml:"protect_metrics,omitempty"`
}

// Agent is one entry of agents:, an llm or an exec agent. Decoding fills the
// defaults of its kind (see NewAgent).
type Agent struct {
	// Kind is "llm", "exec" or "a2a"; required.
	Kind string `yaml:"kind"`

	// Provider is "openai" (default; any OpenAI-compatible server) or
	// "anthropic". llm only.
	Provider string `yaml:"provider,omitempty"`
	// BaseURL is the provider's API root, e.g. http://127.0.0.1:11434/v1;
	// empty means the provider's public endpoint. llm only.
	BaseURL string `yaml:"base_url,omitempty"`
	// Model is the model name sent to the provider; required for llm.
	Model string `yaml:"model,omitempty"`
	// APIKeyEnv names the environment variable holding the API key; empty
	// sends none (local servers). llm only.
	APIKeyEnv string `yaml:"api_key_env,omitempty"`
	// SystemPrompt is the default system prompt; a task may replace it.
	// llm only.
	SystemPrompt string `yaml:"system_prompt,omitempty"`
	// MaxSteps bounds the steps of one task; default 20, at least 1.
	MaxSteps int `yaml:"max_steps"`
	// StepTimeout bounds one step (a model or tool call, or one run of the
	// exec command); default 120s.
	StepTimeout Duration `yaml:"step_timeout"`
	// Mode is "react" (default) or "plan_execute". llm only.
	Mode string `yaml:"mode,omitempty"`
	// Tools, when set, is the only tools the agent may call besides
	// finish_task; empty allows every tool. llm only.
	Tools []string `yaml:"tools,omitempty"`
	// ToolsDeny lists tools the agent may never call. llm only.
	ToolsDeny []string `yaml:"tools_deny,omitempty"`
	// MaxOutputTokens caps each model reply; 0 means the agent's default.
	// llm only.
	MaxOutputTokens int `yaml:"max_output_tokens,omitempty"`

	// Command is the program and its arguments, run once per step; required
	// for exec.
	Command []string `yaml:"command,omitempty"`
	// Env is added to the command's environment. exec only.
	Env map[string]string `yaml:"env,omitempty"`
	// WorkDir is the command's working directory; empty means the daemon's.
	// exec only.
	WorkDir string `yaml:"work_dir,omitempty"`

	// CardURL is the remote A2A agent's card, e.g.
	// https://host/.well-known/agent-card.json; required for a2a.
	CardURL string `yaml:"card_url,omitempty"`
	// TokenEnv names the environment variable holding the bearer token
	// sent to the remote agent; empty sends none. a2a only.
	TokenEnv string `yaml:"token_env,omitempty"`
	// Metadata goes with the message that starts each remote task (an
	// errand peer reads "agent" to pick its agent). a2a only.
	Metadata JSONObject `yaml:"metadata,omitempty"`
}

// NewAgent returns an agent of the given kind with its defaults: max_steps
// 20, step_timeout 120s and, for llm, provider openai and mode react.
func NewAgent(kind string) Agent {
	a := Agent{Kind: kind, MaxSteps: DefaultMaxSteps, StepTimeout: DefaultStepTimeout}
	if kind == KindLLM {
		a.Provider = DefaultProvider
		a.Mode = DefaultMode
	}
	return a
}

// UnmarshalYAML decodes an agent over its defaults, so absent keys keep
// them and present keys are taken literally.
func (a *Agent) UnmarshalYAML(n *yaml.Node) error {
	type plain Agent // without this method
	p := plain(NewAgent(""))
	if err := n.Decode(&p); err != nil {
		return err
	}
	*a = Agent(p)
	if a.Kind == KindLLM {
		def := NewAgent(KindLLM)
		if a.Provider == "" {
			a.Provider = def.Provider
		}
		if a.Mode == "" {
			a.Mode = def.Mode
		}
	}
	return nil
}

// Price is what a model costs, in USD per million tokens.
type Price struct {
	InputPerMTok  float64 `yaml:"input_per_mtok"`
	OutputPerMTok float64 `yaml:"output_per_mtok"`
}

// Budget limits spend. A zero limit is no limit.
type Budget struct {
	// Task is the default budget of each task; a task may set its own.
	Task TaskBudget `yaml:"task"`
	// DailyUSD and MonthlyUSD limit the spend of all tasks per day and
	// month of Timezone (defaults 5.00 and 50.00; 0 is no limit).
	DailyUSD   float64 `yaml:"daily_usd"`
	MonthlyUSD float64 `yaml:"monthly_usd"`
	// AlertThresholds are fractions of the daily and monthly limits, each in
	// (0, 1], at which a budget.alert is emitted once a period; default
	// [0.5, 0.8, 0.9], an empty list leaves only the alert at the limit.
	AlertThresholds []float64 `yaml:"alert_thresholds"`
	// OnLimit is what happens when a daily or monthly limit is reached:
	// "pause-all" (default), "pause-non-critical" or "alert-only".
	OnLimit string `yaml:"on_limit"`
	// Timezone is the IANA zone whose days and months the limits count
	// in; default the machine's own ("Local").
	Timezone string `yaml:"timezone,omitempty"`
}

// TaskBudget is a task's budget. A zero limit is no limit.
type TaskBudget struct {
	MaxTokens    int64    `yaml:"max_tokens,omitempty"`
	MaxCostUSD   float64  `yaml:"max_cost_usd,omitempty"`
	MaxWallClock Duration `yaml:"max_wall_clock,omitempty"`
	MaxToolCalls int      `yaml:"max_tool_calls,omitempty"`
}

// Webhook is an HTTP endpoint that receives events, signed per Standard
// Webhooks.
type Webhook struct {
	// URL is an http or https URL; required.
	URL string `yaml:"url"`
	// Secret is the signing key: the base64 part of a whsec_… secret, or
	// the raw bytes of any other string. Set Secret or SecretEnv, not both.
	Secret string `yaml:"secret,omitempty"`
	// SecretEnv names the environment variable holding the secret.
	SecretEnv string `yaml:"secret_env,omitempty"`
	// Events are the event types delivered, e.g. task.completed; empty
	// delivers every event.
	Events []string `yaml:"events,omitempty"`
	// AllowPrivate allows loopback and private addresses (tests, LAN);
	// default false.
	AllowPrivate bool `yaml:"allow_private,omitempty"`
}

// MCPServer is an MCP server whose tools llm agents may call, as
// "<name>.<tool>". Set Command (a server errand starts and talks to over
// stdio) or URL (a server already running, reached over Streamable HTTP),
// not both.
type MCPServer struct {
	// Command is the program and its arguments.
	Command []string `yaml:"command,omitempty"`
	// Env is added to the environment of a Command server.
	Env map[string]string `yaml:"env,omitempty"`
	// URL is the Streamable HTTP endpoint of a server, http or https.
	URL string `yaml:"url,omitempty"`
	// Headers are sent with every request to a URL server.
	Headers map[string]string `yaml:"headers,omitempty"`
	// TokenEnv names the environment variable holding a bearer token for
	// a URL server, sent as Authorization: Bearer <token>.
	TokenEnv string `yaml:"token_env,omitempty"`
}

// MemoryLimits are the recall limits of tasks by source: a person's
// (user), an agent's (subtasks and tasks agents start), a schedule's, an
// event's and a heartbeat scout's.
type MemoryLimits struct {
	User      MemoryLimit `yaml:"user"`
	Agent     MemoryLimit `yaml:"agent"`
	Schedule  MemoryLimit `yaml:"schedule"`
	Event     MemoryLimit `yaml:"event"`
	Heartbeat MemoryLimit `yaml:"heartbeat"`
}

// MemoryLimit bounds what one recall returns: at most MaxEntries memories
// whose estimated tokens add up to at most MaxTokens. 0 recalls nothing.
type MemoryLimit struct {
	MaxTokens  int `yaml:"max_tokens"`
	MaxEntries int `yaml:"max_entries"`
}

// DefaultMemoryLimits returns the default recall limits: user 4000
// tokens and 25 entries, agent 3000/20, schedule 2000/15, event 1500/10,
// heartbeat 500/5.
func DefaultMemoryLimits() MemoryLimits {
	return MemoryLimits{
		User:      MemoryLimit{MaxTokens: 4000, MaxEntries: 25},
		Agent:     MemoryLimit{MaxTokens: 3000, MaxEntries: 20},
		Schedule:  MemoryLimit{MaxTokens: 2000, MaxEntries: 15},
		Event:     MemoryLimit{MaxTokens: 1500, MaxEntries: 10},
		Heartbeat: MemoryLimit{MaxTokens: 500, MaxEntries: 5},
	}
}

// Default returns the configuration with every default and no agents.
func Default() *Config {
	return &Config{
		Listen:            DefaultListen,
		Store:             DefaultStore,
		Durability:        DefaultDurability,
		Workers:           DefaultWorkers,
		LeaseTTL:          DefaultLeaseTTL,
		MaxSubtaskDepth:   DefaultMaxSubtaskDepth,
		HeartbeatInterval: DefaultHeartbeatInterval,
		Agents:            map[string]Agent{},
		Pricing:           map[string]Price{},
		RateLimits:        map[string]RateLimit{},
		Concurrency:       map[string]int{},
		Budget: Budget{
			DailyUSD:        DefaultDailyUSD,
			MonthlyUSD:      DefaultMonthlyUSD,
			AlertThresholds: DefaultAlertThresholds(),
			OnLimit:         DefaultOnLimit,
		},
		MCPServers:    map[string]MCPServer{},
		Retention:     DefaultRetention,
		MemoryLimits:  DefaultMemoryLimits(),
		Schedules:     map[string]Schedule{},
		OnAgentChange: DefaultOnAgentChange,
	}
}

// normalize makes a decoded config compare equal to its re-encoding: nil
// maps become empty and empty optional lists and maps become nil.
func (c *Config) normalize() {
	if c.Agents == nil {
		c.Agents = map[string]Agent{}
	}
	if c.Pricing == nil {
		c.Pricing = map[string]Price{}
	}
	if c.RateLimits == nil {
		c.RateLimits = map[string]RateLimit{}
	}
	if c.Concurrency == nil {
		c.Concurrency = map[string]int{}
	}
	if c.MCPServers == nil {
		c.MCPServers = map[string]MCPServer{}
	}
	if c.Schedules == nil {
		c.Schedules = map[string]Schedule{}
	}
	if c.Budget.AlertThresholds == nil {
		c.Budget.AlertThresholds = []float64{}
	}
	for name, a := range c.Agents {
		a.Tools = nilIfEmpty(a.Tools)
		a.ToolsDeny = nilIfEmpty(a.ToolsDeny)
		a.Command = nilIfEmpty(a.Command)
		if len(a.Env) == 0 {
			a.Env = nil
		}
		c.Agents[name] = a
	}
	for i := range c.Webhooks {
		c.Webhooks[i].Events = nilIfEmpty(c.Webhooks[i].Events)
	}
	if len(c.Webhooks) == 0 {
		c.Webhooks = nil
	}
	for name, s := range c.MCPServers {
		s.Command = nilIfEmpty(s.Command)
		if len(s.Env) == 0 {
			s.Env = nil
		}
		if len(s.Headers) == 0 {
			s.Headers = nil
		}
		c.MCPServers[name] = s
	}
	for name, s := range c.Schedules {
		if len(s.Task) == 0 {
			s.Task = nil
		}
		c.Schedules[name] = s
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
