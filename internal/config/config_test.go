package config

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.yaml.in/yaml/v3"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// designExample is the config DESIGN.md shows, as the struct it must parse
// to.
func designExample() *Config {
	return &Config{
		Listen:            "127.0.0.1:7780",
		Store:             "sqlite",
		Durability:        "normal",
		Workers:           4,
		LeaseTTL:          Duration(90 * time.Second),
		MaxSubtaskDepth:   3,
		HeartbeatInterval: Duration(30 * time.Second),
		Agents: map[string]Agent{
			"default": {
				Kind:         "llm",
				Provider:     "openai",
				BaseURL:      "http://127.0.0.1:11434/v1",
				Model:        "llama3.2",
				APIKeyEnv:    "OPENAI_API_KEY",
				SystemPrompt: "You are a careful assistant.",
				MaxSteps:     20,
				StepTimeout:  Duration(120 * time.Second),
				Mode:         "react",
			},
			"shell": {
				Kind:        "exec",
				MaxSteps:    20,
				StepTimeout: Duration(120 * time.Second),
				Command:     []string{"./examples/agents/shell-agent.sh"},
			},
		},
		Pricing: map[string]Price{
			"gpt-4o-mini": {InputPerMTok: 0.15, OutputPerMTok: 0.60},
		},
		RateLimits:  map[string]RateLimit{},
		Concurrency: map[string]int{},
		Budget: Budget{
			Task: TaskBudget{
				MaxTokens:    50000,
				MaxCostUSD:   0.50,
				MaxWallClock: Duration(5 * time.Minute),
				MaxToolCalls: 50,
			},
			DailyUSD:        5.00,
			MonthlyUSD:      50.00,
			AlertThresholds: []float64{0.5, 0.8, 0.9},
			OnLimit:         "pause-all",
		},
		Webhooks: []Webhook{{
			URL:       "https://hooks.example.com/errand",
			SecretEnv: "ERRAND_WEBHOOK_SECRET",
			Events:    []string{"task.completed", "task.failed", "task.input_required"},
		}},
		MCPServers: map[string]MCPServer{
			"files": {Command: []string{"mcp-server-filesystem", "/srv/data"}},
		},
		Retention:     Duration(720 * time.Hour),
		MemoryLimits:  DefaultMemoryLimits(),
		Lanes:         "session",
		OnAgentChange: "continue",
		Schedules: map[string]Schedule{
			"morning-scout": {
				Kind:        "heartbeat",
				Spec:        "10m",
				ActiveHours: "08:00-22:00",
				Timezone:    "Europe/Berlin",
				Enabled:     true,
				Task:        TaskTemplate(`{"agent":"scout","budget":{"max_cost_usd":0.02},"prompt_file":"HEARTBEAT.md"}`),
			},
		},
		Auth: Auth{TokenEnv: "ERRAND_TOKEN"},
	}
}

func readExample(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/design_example.yaml")
	require.NoError(t, err)
	return data
}

func TestParseDesignExample(t *testing.T) {
	t.Parallel()

	cfg, err := Parse(readExample(t))
	require.NoError(t, err)
	require.Equal(t, designExample(), cfg)
}

func TestDefault(t *testing.T) {
	t.Parallel()

	want := &Config{
		Listen:            "127.0.0.1:7780",
		Store:             "sqlite",
		Durability:        "normal",
		Workers:           4,
		LeaseTTL:          Duration(90 * time.Second),
		MaxSubtaskDepth:   3,
		HeartbeatInterval: Duration(30 * time.Second),
		Agents:            map[string]Agent{},
		Pricing:           map[string]Price{},
		RateLimits:        map[string]RateLimit{},
		Concurrency:       map[string]int{},
		Budget:            Budget{DailyUSD: 5, MonthlyUSD: 50, AlertThresholds: []float64{0.5, 0.8, 0.9}, OnLimit: "pause-all"},
		MCPServers:        map[string]MCPServer{},
		Retention:         Duration(720 * time.Hour),
		MemoryLimits: MemoryLimits{
			User: MemoryLimit{4000, 25}, Agent: MemoryLimit{3000, 20}, Schedule: MemoryLimit{2000, 15},
			Event: MemoryLimit{1500, 10}, Heartbeat: MemoryLimit{500, 5},
		},
		Schedules:     map[string]Schedule{},
		OnAgentChange: "continue",
	}
	require.Equal(t, want, Default())
	require.NoError(t, Default().Validate())

	// Defaults are fresh each call.
	a := Default()
	a.Budget.AlertThresholds[0] = 0.1
	a.Agents["x"] = NewAgent(KindExec)
	require.Equal(t, want, Default())

	for _, doc := range []string{
		"",
		"\n",
		"# only a comment\n",
		"---\n",
		"~\n",
		"{}\n",
		// A key set to null keeps its default.
		"listen:\nworkers: ~\nlease_ttl: null\nbudget:\nagents:\nwebhooks:\nmcp_servers: ~\nschedules:\n",
		"budget: {alert_thresholds: ~, on_limit: ~}\n",
	} {
		cfg, err := Parse([]byte(doc))
		require.NoError(t, err, "%q", doc)
		require.Equal(t, want, cfg, "%q", doc)
	}
}

func TestPresentKeysAreLiteral(t *testing.T) {
	t.Parallel()

	cfg, err := Parse([]byte("max_subtask_depth: 0\nretention: 0\nbudget: {alert_thresholds: []}\n"))
	require.NoError(t, err)
	require.Equal(t, 0, cfg.MaxSubtaskDepth)
	require.Equal(t, Duration(0), cfg.Retention)
	require.Empty(t, cfg.Budget.AlertThresholds)

	_, err = Parse([]byte("workers: 0\n"))
	require.EqualError(t, err, "workers: must be at least 1")
}

func TestAgentDefaults(t *testing.T) {
	t.Parallel()

	cfg, err := Parse([]byte(`
agents:
  a: {kind: llm, model: m}
  b: {kind: llm, model: m, provider: anthropic, mode: plan_execute, max_steps: 5, step_timeout: 1s}
  c: {kind: exec, command: [x]}
`))
	require.NoError(t, err)
	require.Equal(t, Agent{Kind: "llm", Provider: "openai", Model: "m", Mode: "react", MaxSteps: 20, StepTimeout: Duration(120 * time.Second)}, cfg.Agents["a"])
	require.Equal(t, Agent{Kind: "llm", Provider: "anthropic", Model: "m", Mode: "plan_execute", MaxSteps: 5, StepTimeout: Duration(time.Second)}, cfg.Agents["b"])
	require.Equal(t, Agent{Kind: "exec", Command: []string{"x"}, MaxSteps: 20, StepTimeout: Duration(120 * time.Second)}, cfg.Agents["c"])

	require.Equal(t, Agent{Kind: "llm", Provider: "openai", Mode: "react", MaxSteps: 20, StepTimeout: Duration(120 * time.Second)}, NewAgent(KindLLM))
	require.Equal(t, Agent{Kind: "exec", MaxSteps: 20, StepTimeout: Duration(120 * time.Second)}, NewAgent(KindExec))
}

func TestValidateMessages(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		yaml string
		want string // the whole error
	}{
		{"Workers", "workers: 0", "workers: must be at least 1"},
		{"WorkersNegative", "workers: -3", "workers: must be at least 1"},
		{"LeaseTTL", "lease_ttl: 500ms", "lease_ttl: must be at least 1s"},
		{"LeaseTTLZero", "lease_ttl: 0", "lease_ttl: must be at least 1s"},
		{"MaxSubtaskDepth", "max_subtask_depth: -1", "max_subtask_depth: must not be negative"},
		{"HeartbeatInterval", "heartbeat_interval: 10ms", "heartbeat_interval: must be at least 1s"},
		{"Durability", "durability: fast", `durability: "fast" is not normal or full`},
		{"ListenEmpty", `listen: ""`, "listen: required: host:port"},
		{"ListenNoPort", "listen: localhost", `listen: "localhost" is not host:port`},
		{"ListenBadPort", "listen: localhost:http", `listen: "localhost:http" is not host:port: the port must be a number from 0 to 65535`},
		{"ListenBigPort", "listen: :70000", `listen: ":70000" is not host:port: the port must be a number from 0 to 65535`},
		{"StoreEmpty", `store: ""`, `store: required: "sqlite", a SQLite path or sqlite:// URL, or a postgres:// URL`},
		{"StoreScheme", "store: mysql://u:secret@h/db", `store: "mysql://…" is not a store: use sqlite, a SQLite path or sqlite:// URL, or a postgres:// URL`},
		{"StorePostgresWord", "store: postgres", `store: "postgres" needs a URL like postgres://user@host:5432/db`},
		{"StorePostgresBad", "store: postgres://u:secret@h:port/db", `store: not a valid postgres URL: invalid port ":port" after host`},
		{"StoreSQLiteEmpty", "store: 'sqlite://'", `store: "sqlite://" names no file`},

		{"AgentKind", "agents: {x: {kind: robot}}", `agents.x.kind: "robot" is not llm, exec or a2a`},
		{"AgentKindMissing", "agents: {x: {max_steps: 3}}", "agents.x.kind: required: llm, exec or a2a"},
		{"AgentNull", "agents: {x: ~}", "agents.x.kind: required: llm, exec or a2a\nagents.x.max_steps: must be at least 1\nagents.x.step_timeout: must be positive"},
		{"AgentName", "agents: {'bad name': {kind: exec, command: [x]}}", `agents: "bad name" is not a valid agent name: use letters, digits, '-', '_' and '.'`},
		{"ExecCommand", "agents: {shell: {kind: exec}}", "agents.shell.command: required for kind exec"},
		{"ExecCommandEmpty", "agents: {shell: {kind: exec, command: ['']}}", "agents.shell.command[0]: must name a program"},
		{"ExecLLMKeys", "agents: {shell: {kind: exec, command: [x], model: m, tools: [a]}}", "agents.shell.model: only for kind llm\nagents.shell.tools: only for kind llm"},
		{"ExecEnv", "agents: {shell: {kind: exec, command: [x], env: {'A B': c}}}", `agents.shell.env: "A B" is not a valid environment variable name`},
		{"LLMModel", "agents: {default: {kind: llm}}", "agents.default.model: required for kind llm"},
		{"A2ABaseURL", "a2a: {base_url: 'errand.example.com'}", "a2a.base_url: must be an http or https URL"},
		{"A2ADefaultAgent", "a2a: {default_agent: nobody}", `a2a.default_agent: "nobody" is not an agent in agents`},
		{"A2ACardURL", "agents: {far: {kind: a2a}}", "agents.far.card_url: required for kind a2a: the remote agent's card, e.g. https://host/.well-known/agent-card.json"},
		{"A2ACardURLBad", "agents: {far: {kind: a2a, card_url: 'ftp://x/card'}}", "agents.far.card_url: must be an http or https URL"},
		{"A2ATokenEnv", "agents: {far: {kind: a2a, card_url: 'https://x/card', token_env: 'A B'}}", `agents.far.token_env: "A B" is not a valid environment variable name`},
		{"A2AOtherKeys", "agents: {far: {kind: a2a, card_url: 'https://x/card', model: m, command: [x]}}", "agents.far.model: only for kind llm\nagents.far.command: only for kind exec"},
		{"ExecA2AKeys", "agents: {shell: {kind: exec, command: [x], card_url: 'https://x/card'}}", "agents.shell.card_url: only for kind a2a"},
		{"LLMProvider", "agents: {default: {kind: llm, model: m, provider: x}}", `agents.default.provider: "x" is not openai or anthropic`},
		{"LLMMode", "agents: {default: {kind: llm, model: m, mode: x}}", `agents.default.mode: "x" is not react or plan_execute`},
		{"LLMBaseURL", "agents: {default: {kind: llm, model: m, base_url: '127.0.0.1:11434'}}", "agents.default.base_url: must be an http or https URL"},
		{"LLMAPIKeyEnv", "agents: {default: {kind: llm, model: m, api_key_env: 'sk-123'}}", `agents.default.api_key_env: "sk-123" is not a valid environment variable name`},
		{"LLMMaxSteps", "agents: {default: {kind: llm, model: m, max_steps: 0}}", "agents.default.max_steps: must be at least 1"},
		{"LLMStepTimeout", "agents: {default: {kind: llm, model: m, step_timeout: 0s}}", "agents.default.step_timeout: must be positive"},
		{"LLMMaxOutputTokens", "agents: {default: {kind: llm, model: m, max_output_tokens: -1}}", "agents.default.max_output_tokens: must not be negative"},
		{"LLMTools", "agents: {default: {kind: llm, model: m, tools: [a, ''], tools_deny: [' ']}}", "agents.default.tools[1]: must not be empty\nagents.default.tools_deny[0]: must not be empty"},
		{"LLMExecKeys", "agents: {default: {kind: llm, model: m, command: [x], work_dir: /tmp}}", "agents.default.command: only for kind exec\nagents.default.work_dir: only for kind exec"},

		{"PriceNegative", "pricing: {gpt-4o-mini: {input_per_mtok: -1}}", "pricing.gpt-4o-mini.input_per_mtok: must not be negative"},
		{"PriceNaN", "pricing: {m: {output_per_mtok: .nan}}", "pricing.m.output_per_mtok: must be a finite number"},
		{"PriceEmptyName", "pricing: {' ': {input_per_mtok: 1}}", "pricing: model names must not be empty"},

		{"RateLimitNegative", "rate_limits: {gpt-4o: {requests_per_minute: -1, tokens_per_minute: 10}}", "rate_limits.gpt-4o.requests_per_minute: must not be negative"},
		{"RateLimitTokensNegative", "rate_limits: {m: {requests_per_minute: 60, tokens_per_minute: -5}}", "rate_limits.m.tokens_per_minute: must not be negative"},
		{"RateLimitNone", "rate_limits: {m: {requests_per_minute: 0}}", "rate_limits.m: set requests_per_minute or tokens_per_minute above 0 (or leave the model out)"},
		{"RateLimitNull", "rate_limits: {m: ~}", "rate_limits.m: set requests_per_minute or tokens_per_minute above 0 (or leave the model out)"},
		{"RateLimitEmptyModel", "rate_limits: {' ': {requests_per_minute: 60}}", "rate_limits: model names must not be empty"},
		{"RateLimitFraction", "rate_limits: {m: {requests_per_minute: 1.5}}", `rate_limits.m.requests_per_minute: "1.5" is not an integer (line 1)`},
		{"RateLimitUnknownKey", "rate_limits: {m: {rpm: 60}}", "rate_limits.m.rpm: unknown key (line 1)"},

		{"ConcurrencyNegative", "concurrency: {repo:main: -1}", "concurrency.repo:main: -1 must not be negative (0 runs none, leave the key out for no limit)"},
		{"ConcurrencyEmptyKey", "concurrency: {' ': 2}", "concurrency: keys must not be empty"},
		{"ConcurrencyControl", "concurrency: {\"a\\x07b\": 2}", `concurrency: key "a\ab" holds the control character U+0007 at byte 1`},
		{"ConcurrencyLongKey", "concurrency: {" + strings.Repeat("k", 201) + ": 2}", `concurrency: key "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"… is 201 bytes; the limit is 200`},
		{"ConcurrencyUnknownAgent", "agents: {shell: {kind: exec, command: [x]}}\nconcurrency: {agent:shel: 1}", `concurrency.agent:shel: "shel" is not an agent in agents`},
		{"ConcurrencyFraction", "concurrency: {k: 2.5}", `concurrency.k: "2.5" is not an integer (line 1)`},
		{"ConcurrencyNotNumber", "concurrency: {k: many}", `concurrency.k: "many" is not an integer (line 1)`},

		{"OnLimit", "budget: {on_limit: nope}", `budget.on_limit: "nope" is not pause-all, pause-non-critical or alert-only`},
		{"AlertThresholdZero", "budget: {alert_thresholds: [0, 0.5]}", "budget.alert_thresholds[0]: must be greater than 0 and at most 1"},
		{"AlertThresholdAboveOne", "budget: {alert_thresholds: [0.5, 1.5]}", "budget.alert_thresholds[1]: must be greater than 0 and at most 1"},
		{"TaskBudget", "budget: {task: {max_tokens: -1, max_cost_usd: -0.5, max_tool_calls: -2}}", "budget.task.max_tokens: must not be negative\nbudget.task.max_cost_usd: must not be negative\nbudget.task.max_tool_calls: must not be negative"},
		{"DailyMonthly", "budget: {daily_usd: -1, monthly_usd: .inf}", "budget.daily_usd: must not be negative\nbudget.monthly_usd: must be a finite number"},
		{"Timezone", "budget: {timezone: Mars/Base}", `budget.timezone: "Mars/Base" is not an IANA time zone`},

		{"WebhookURL", "webhooks: [{url: 'ftp://x'}]", "webhooks[0].url: must be an http or https URL"},
		{"WebhookURLMissing", "webhooks: [{secret: s}]", "webhooks[0].url: must be an http or https URL"},
		{"WebhookBothSecrets", "webhooks: [{url: 'https://x', secret: s, secret_env: S}]", "webhooks[0]: set secret or secret_env, not both"},
		{"WebhookWhsec", "webhooks: [{url: 'https://x', secret: 'whsec_!!'}]", "webhooks[0].secret: the part after whsec_ is not valid base64"},
		{"WebhookWhsecEmpty", "webhooks: [{url: 'https://x', secret: 'whsec_'}]", "webhooks[0].secret: the part after whsec_ is empty"},
		{"WebhookURLNumber", "webhooks: [{url: 'http://2130706433/h'}]", `webhooks[0].url: host "2130706433" of http://2130706433/h is numeric but not four decimal parts: write an IPv4 address as four decimal parts, like 127.0.0.1`},
		{"WebhookURLHex", "webhooks: [{url: 'http://0x7f000001/', allow_private: true}]", `webhooks[0].url: host "0x7f000001" of http://0x7f000001/ is numeric but not four decimal parts: write an IPv4 address as four decimal parts, like 127.0.0.1`},
		{"WebhookURLShort", "webhooks: [{url: 'https://x'}, {url: 'http://u:p@127.1:8080/'}]", `webhooks[1].url: host "127.1" of http://u:xxxxx@127.1:8080/ is numeric but not four decimal parts: write an IPv4 address as four decimal parts, like 127.0.0.1`},
		{"WebhookURLOctalPart", "webhooks: [{url: 'http://0177.0.0.1/'}]", `webhooks[0].url: host "0177.0.0.1" of http://0177.0.0.1/ is numeric but not four decimal parts: write an IPv4 address as four decimal parts, like 127.0.0.1`},
		{"WebhookURLNonASCII", "webhooks: [{url: 'http://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ/'}]", `webhooks[0].url: host "ⓛⓞⓒⓐⓛⓗⓞⓢⓣ" of http://%E2%93%9B%E2%93%9E%E2%93%92%E2%93%90%E2%93%9B%E2%93%97%E2%93%9E%E2%93%A2%E2%93%A3/ is not ASCII: write an internationalized name in its xn-- form`},
		{"WebhookSecretEnv", "webhooks: [{url: 'https://x', secret_env: '1X'}]", `webhooks[0].secret_env: "1X" is not a valid environment variable name`},
		{"WebhookEvents", "webhooks: [{url: 'https://x'}, {url: 'https://y', events: [task.completed, Task Done]}]", `webhooks[1].events[1]: "Task Done" is not an event type like task.completed`},

		{"MCPNeither", "mcp_servers: {files: {env: {A: b}}}", "mcp_servers.files: set command (a server errand starts and talks to over stdio) or url (a Streamable HTTP server)"},
		{"MCPBoth", "mcp_servers: {files: {command: [x], url: 'https://x/mcp'}}", "mcp_servers.files: set command or url, not both"},
		{"MCPProgram", "mcp_servers: {files: {command: [' ', a]}}", "mcp_servers.files.command[0]: must name a program"},
		{"MCPEnvName", "mcp_servers: {files: {command: [x], env: {1A: b}}}", `mcp_servers.files.env: "1A" is not a valid environment variable name`},
		{"MCPHeadersForCommand", "mcp_servers: {files: {command: [x], headers: {X-A: b}}}", "mcp_servers.files.headers: only for a url server"},
		{"MCPTokenForCommand", "mcp_servers: {files: {command: [x], token_env: T}}", "mcp_servers.files.token_env: only for a url server"},
		{"MCPURL", "mcp_servers: {web: {url: 'ws://x/mcp'}}", "mcp_servers.web.url: must be an http or https URL"},
		{"MCPEnvForURL", "mcp_servers: {web: {url: 'https://x/mcp', env: {A: b}}}", "mcp_servers.web.env: only for a command server"},
		{"MCPHeaderName", "mcp_servers: {web: {url: 'https://x/mcp', headers: {'X A': b}}}", `mcp_servers.web.headers: "X A" is not a valid HTTP header name`},
		{"MCPHeaderValue", "mcp_servers: {web: {url: 'https://x/mcp', headers: {X-A: \"b\\r\\nX-Evil: 1\"}}}", "mcp_servers.web.headers.X-A: has a control character or is not valid UTF-8"},
		{"MCPTransportHeader", "mcp_servers: {web: {url: 'https://x/mcp', headers: {mcp-session-id: s}}}", "mcp_servers.web.headers.mcp-session-id: is set by the MCP transport"},
		{"MCPAuthTwice", "mcp_servers: {web: {url: 'https://x/mcp', headers: {authorization: Bearer x}, token_env: T}}", "mcp_servers.web.headers.authorization: set Authorization here or token_env, not both"},
		{"MCPTokenEnv", "mcp_servers: {web: {url: 'https://x/mcp', token_env: 'A-B'}}", `mcp_servers.web.token_env: "A-B" is not a valid environment variable name`},
		{"MCPName", "mcp_servers: {'a.b': {command: [x]}}", `mcp_servers: "a.b" is not a valid server name: use letters, digits, '-' and '_'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse([]byte(tt.yaml))
			require.EqualError(t, err, tt.want)
			require.Nil(t, cfg)
			for _, fe := range FieldErrors(err) {
				require.NotEmpty(t, fe.Path)
			}
		})
	}
}

func TestValidAlternatives(t *testing.T) {
	t.Parallel()

	for _, doc := range []string{
		"store: postgres://errand@db.internal:5432/errand?sslmode=disable",
		"store: postgresql:///errand",
		"store: sqlite:///var/lib/errand/errand.db",
		"store: sqlite:data/errand.db",
		"store: ./errand.db",
		"durability: full",
		"listen: ':0'",
		"listen: '[::1]:7780'",
		"budget: {on_limit: pause-non-critical, alert_thresholds: [1]}",
		"budget: {on_limit: alert-only}",
		"webhooks: [{url: 'http://127.0.0.1:9/h', secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', allow_private: true, events: ['*']}]",
		"webhooks: [{url: 'https://x/y'}]",
		"webhooks: [{url: 'https://1password.com/h'}, {url: 'https://123.example.com/'}, {url: 'https://0x7f.example/'}, {url: 'https://xn--bcher-kva.example/'}]",
		"webhooks: [{url: 'http://[::1]:9/h', allow_private: true}]",
		"mcp_servers: {files: {command: [srv, -v], env: {LOG_LEVEL: debug}}}",
		"mcp_servers: {web: {url: 'https://mcp.example.com/mcp', headers: {X-Tenant: 'a b\tc', User-Agent: errand}, token_env: MCP_TOKEN}}",
		"mcp_servers: {web: {url: 'http://127.0.0.1:8080/mcp', headers: {Authorization: Basic eDp5}}, files: {command: [x]}}",
		"agents: {a.b-c_1: {kind: exec, command: [x], env: {PATH: /bin}, work_dir: /tmp, max_steps: 1, step_timeout: 1ms}}",
		"agents: {c: {kind: llm, provider: anthropic, model: claude, tools: [web_fetch], tools_deny: [cancel_task], max_output_tokens: 1024}}",
		"pricing: {meta-llama/Llama-3-8b:latest: {input_per_mtok: 0, output_per_mtok: 1}}",
		"rate_limits: {gpt-4o-mini: {requests_per_minute: 500, tokens_per_minute: 200000}, meta-llama/Llama-3-8b:latest: {tokens_per_minute: 1}}",
		"agents: {shell: {kind: exec, command: [x]}}\nconcurrency: {agent:shell: 2, agent:default: 1, 'customer:acme': 0, repo:errand: 1, 'ünïcode key': 3}",
	} {
		_, err := Parse([]byte(doc))
		require.NoError(t, err, doc)
	}
}

func TestAllProblemsAtOnce(t *testing.T) {
	t.Parallel()

	_, err := Parse([]byte(`
workers: 0
lease_ttl: 1ms
agents:
  shell: {kind: exec}
  x: {kind: robot, command: [a]}
budget: {on_limit: nope}
webhooks:
  - url: https://x
    secret: a
    secret_env: B
`))
	require.Error(t, err)
	var paths []string
	for _, fe := range FieldErrors(err) {
		paths = append(paths, fe.Path)
	}
	require.Equal(t, []string{"workers", "lease_ttl", "agents.shell.command", "agents.x.kind", "budget.on_limit", "webhooks[0]"}, paths)
}

func TestStrictDecoding(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"UnknownTopLevel", "listen: ':1'\nworkerz: 3\n", "workerz: unknown key (did you mean workers?) (line 2)"},
		{"UnknownTopLevelFar", "colour: blue\n", "colour: unknown key (line 1)"},
		{"DashedKey", "lease-ttl: 5s\n", "lease-ttl: unknown key (did you mean lease_ttl?) (line 1)"},
		{"UnknownAgentKey", "agents:\n  default:\n    kind: llm\n    model: m\n    max_step: 5\n", "agents.default.max_step: unknown key (did you mean max_steps?) (line 5)"},
		{"UnknownBudgetTaskKey", "budget:\n  task: {max_tokenz: 1}\n", "budget.task.max_tokenz: unknown key (did you mean max_tokens?) (line 2)"},
		{"UnknownWebhookKey", "webhooks:\n  - url: https://x\n  - url: https://y\n    secrets: s\n", "webhooks[1].secrets: unknown key (did you mean secret?) (line 4)"},
		{"UnknownPriceKey", "pricing: {m: {input: 1}}\n", "pricing.m.input: unknown key (line 1)"},
		{"UnknownMCPKey", "mcp_servers: {f: {command: [x], cmd: [x]}}\n", "mcp_servers.f.cmd: unknown key (line 1)"},
		{"UnknownMCPHTTPKey", "mcp_servers: {f: {url: 'https://x', header: {A: b}}}\n", "mcp_servers.f.header: unknown key (did you mean headers?) (line 1)"},
		{"Duplicate", "workers: 1\nworkers: 2\n", "workers: set twice (first at line 1) (line 2)"},
		{"DuplicateAgent", "agents:\n  a: {kind: exec, command: [x]}\n  a: {kind: exec, command: [y]}\n", "agents.a: set twice (first at line 2) (line 3)"},
		{"NotInteger", "workers: many\n", `workers: "many" is not an integer (line 1)`},
		{"FloatForInteger", "workers: 4.5\n", `workers: "4.5" is not an integer (line 1)`},
		{"IntegerOverflow", "budget: {task: {max_tokens: 99999999999999999999}}\n", `budget.task.max_tokens: "99999999999999999999" is not an integer (line 1)`},
		{"NotNumber", "budget: {daily_usd: five}\n", `budget.daily_usd: "five" is not a number (line 1)`},
		{"NotBool", "webhooks: [{url: 'https://x', allow_private: maybe}]\n", `webhooks[0].allow_private: "maybe" is not true or false (line 1)`},
		{"DurationNoUnit", "lease_ttl: 90\n", `lease_ttl: "90" has no unit: write a duration like 90s, 5m or 720h (line 1)`},
		{"DurationNegative", "retention: -1h\n", `retention: "-1h" must not be negative (line 1)`},
		{"DurationBad", "agents: {a: {kind: exec, command: [x], step_timeout: soon}}\n", `agents.a.step_timeout: "soon" is not a duration like 90s, 5m or 720h (line 1)`},
		{"DurationList", "lease_ttl: [1s]\n", "lease_ttl: must be a duration like 90s, 5m or 720h (line 1)"},
		{"StringList", "agents: {a: {kind: exec, command: x}}\n", "agents.a.command: must be a list (line 1)"},
		{"ListItem", "agents: {a: {kind: exec, command: [x, {y: z}]}}\n", "agents.a.command[1]: must be a string (line 1)"},
		{"NullItem", "agents: {a: {kind: exec, command: [x, ~]}}\n", "agents.a.command[1]: must not be null (line 1)"},
		{"StructScalar", "budget: 5\n", "budget: must be a mapping (line 1)"},
		{"MapScalar", "agents: none\n", "agents: must be a mapping (line 1)"},
		{"MapKey", "agents: {? [a]: {kind: exec}}\n", "agents: keys must be non-empty strings (line 1)"},
		{"TopLevelList", "- a\n- b\n", "the file must be a mapping of keys to values (line 1)"},
		{"TopLevelScalar", "hello\n", "the file must be a mapping of keys to values (line 1)"},
		{"TwoDocuments", "workers: 1\n---\nworkers: 2\n", "the file holds more than one YAML document (line 2)"},
		{"Syntax", "workers: [1\n", "YAML syntax error at line 1, column 11: did not find expected ',' or ']'\n  1 | workers: [1\n    |           ^"},
		{"Tab", "agents:\n\tdefault: {}\n", "YAML syntax error at line 2, column 1: found character that cannot start any token\n  2 | \tdefault: {}\n    | ^"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse([]byte(tt.yaml))
			require.EqualError(t, err, tt.want)
			require.Nil(t, cfg)
		})
	}

	t.Run("EveryUnknownKey", func(t *testing.T) {
		t.Parallel()
		_, err := Parse([]byte("a: 1\nagents: {x: {kind: exec, b: 2}}\nbudget: {task: {c: 3}}\nworkers: z\n"))
		var got []string
		for _, fe := range FieldErrors(err) {
			got = append(got, fe.Path)
		}
		// Decoding problems come first, with lines, then what validation
		// finds in the rest.
		require.Equal(t, []string{"a", "agents.x.b", "budget.task.c", "workers", "agents.x.command"}, got)
		require.Equal(t, 4, FieldErrors(err)[3].Line)
		require.Zero(t, FieldErrors(err)[4].Line)
	})
}

func TestAliasesAndMerges(t *testing.T) {
	t.Parallel()

	cfg, err := Parse([]byte(`
agents:
  base: &base
    kind: llm
    model: llama3.2
    base_url: http://127.0.0.1:11434/v1
  writer:
    <<: *base
    system_prompt: write
  copy: *base
`))
	require.NoError(t, err)
	base := Agent{Kind: "llm", Provider: "openai", BaseURL: "http://127.0.0.1:11434/v1", Model: "llama3.2", Mode: "react", MaxSteps: 20, StepTimeout: Duration(120 * time.Second)}
	writer := base
	writer.SystemPrompt = "write"
	require.Equal(t, map[string]Agent{"base": base, "writer": writer, "copy": base}, cfg.Agents)

	// Keys merged in are checked like any other.
	_, err = Parse([]byte("x: &x {kind: exec}\n"))
	require.EqualError(t, err, "x: unknown key (line 1)")
	_, err = Parse([]byte("agents:\n  a: &a {kind: exec, command: [x], bogus: 1}\n  b: {<<: *a}\n"))
	require.EqualError(t, err, "agents.a.bogus: unknown key (line 2)")
	_, err = Parse([]byte("budget: &b {on_limit: alert-only}\nagents: {a: {<<: *b, kind: exec, command: [x]}}\n"))
	require.EqualError(t, err, "agents.a.on_limit: unknown key (line 1)")
	_, err = Parse([]byte("agents: {a: &a {<<: *a, kind: exec, command: [x]}}\n"))
	require.EqualError(t, err, "agents.a: an alias refers to the value that contains it (line 1)")
	_, err = Parse([]byte("agents: {a: {<<: [1], kind: exec}}\n"))
	require.EqualError(t, err, "agents.a: << must merge a mapping or a list of mappings (line 1)")
}

func TestFieldErrors(t *testing.T) {
	t.Parallel()

	require.Nil(t, FieldErrors(nil))
	_, err := LoadFile("testdata/bad.yaml", true)
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), "load config testdata/bad.yaml: "), err.Error())
	fes := FieldErrors(err)
	require.Len(t, fes, 2)
	require.Equal(t, &FieldError{Path: "workers", Message: "must be at least 1"}, fes[0])
	require.Equal(t, &FieldError{Path: "agents.shell.command", Message: "required for kind exec"}, fes[1])
}

func TestMarshalRoundTrip(t *testing.T) {
	t.Parallel()

	for _, cfg := range []*Config{designExample(), Default()} {
		data, err := yaml.Marshal(cfg)
		require.NoError(t, err)
		got, err := Parse(data)
		require.NoError(t, err, string(data))
		require.Equal(t, cfg, got, string(data))
	}
}

func TestMemoryKeys(t *testing.T) {
	t.Parallel()

	cfg, err := Parse([]byte("memory_retention: 2160h\nmemory_limits: {heartbeat: {max_tokens: 800}, user: {max_entries: 0}}\n"))
	require.NoError(t, err)
	require.Equal(t, Duration(2160*time.Hour), cfg.MemoryRetention)
	want := DefaultMemoryLimits()
	want.Heartbeat.MaxTokens = 800 // max_entries keeps its default
	want.User.MaxEntries = 0       // present keys are literal
	require.Equal(t, want, cfg.MemoryLimits)
	require.Equal(t, Duration(0), Default().MemoryRetention, "memories are kept forever by default")

	_, err = Parse([]byte("memory_retention: -1h\nmemory_limits: {agent: {max_tokens: -5, max_entries: 1001}, persons: {}}\n"))
	require.Error(t, err)
	for _, msg := range []string{"memory_retention", "memory_limits.agent.max_tokens", "memory_limits.agent.max_entries", "memory_limits.persons"} {
		require.Contains(t, err.Error(), msg)
	}
}

func TestA2AAgent(t *testing.T) {
	cfg, err := Parse([]byte("agents:\n  far:\n    kind: a2a\n    card_url: https://peer.example/.well-known/agent-card.json\n" +
		"    token_env: PEER_TOKEN\n    metadata: {agent: researcher, tags: [a, 2], deep: {x: 1.5}}\n"))
	require.NoError(t, err)
	far := cfg.Agents["far"]
	require.Equal(t, KindA2A, far.Kind)
	require.Equal(t, "https://peer.example/.well-known/agent-card.json", far.CardURL)
	require.Equal(t, "PEER_TOKEN", far.TokenEnv)
	require.JSONEq(t, `{"agent":"researcher","tags":["a",2],"deep":{"x":1.5}}`, string(far.Metadata))

	for doc, want := range map[string]string{
		"agents: {far: {kind: a2a, card_url: 'https://x/c', metadata: [a]}}":       "agents.far.metadata: must be a mapping",
		"agents: {far: {kind: a2a, card_url: 'https://x/c', metadata: {a: .nan}}}": `agents.far.metadata.a: ".nan" is not a number JSON can hold`,
	} {
		_, err := Parse([]byte(doc))
		require.ErrorContains(t, err, want, doc)
	}
}

func TestOnAgentChange(t *testing.T) {
	t.Parallel()
	for doc, want := range map[string]string{
		"":                          OnAgentChangeContinue,
		"on_agent_change: fail":     OnAgentChangeFail,
		"on_agent_change: continue": OnAgentChangeContinue,
	} {
		cfg, err := Parse([]byte(doc))
		require.NoError(t, err, doc)
		require.Equal(t, want, cfg.OnAgentChange, doc)
	}
	for _, doc := range []string{"on_agent_change: stop", `on_agent_change: ""`, "on_agent_change: FAIL"} {
		_, err := Parse([]byte(doc))
		require.Error(t, err, doc)
		fes := FieldErrors(err)
		require.Len(t, fes, 1, doc)
		require.Equal(t, "on_agent_change", fes[0].Path, doc)
		require.Contains(t, fes[0].Message, "is not continue or fail", doc)
	}
}
