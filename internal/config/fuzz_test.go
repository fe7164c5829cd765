package config

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// FuzzParse checks that Parse never panics, that what it accepts is valid,
// and that an accepted config survives encoding and parsing again.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile("testdata/design_example.yaml")
	require.NoError(f, err)
	for _, seed := range []string{
		string(example),
		"",
		"workers: 0",
		"lease_ttl: 90",
		"agents: {a: &a {kind: exec, command: [x]}, b: *a, c: {<<: *a, max_steps: 2}}",
		"agents: {x: ~}",
		"budget: {alert_thresholds: [.nan, .inf, 0.5]}",
		"webhooks: [{url: 'https://x', secret: whsec_AAAA, events: [task.failed]}]",
		"pricing: {m: {input_per_mtok: 1e308}}",
		"rate_limits: {gpt-4o-mini: {requests_per_minute: 500, tokens_per_minute: 200000}, m: {tokens_per_minute: 1}}",
		"rate_limits: {m: {requests_per_minute: -1, tokens_per_minute: 9223372036854775807}, ' ': {}, n: ~}",
		"agents: {shell: {kind: exec, command: [x]}}\nconcurrency: {agent:shell: 2, agent:default: 0, 'repo:web': 1}",
		"concurrency: {agent:ghost: 1, k: -1, ' ': 2, \"a\\tb\": 1.5, m: 99999999999999999999}",
		"schedules: {s: {kind: interval, spec: 1h, task: {goal: g, concurrency_key: 'repo:web', debounce: {key: k, period: 5s}}}}",
		"a: &x [*x]",
		"- 1\n- 2",
		"workers: 1\n---\nworkers: 2",
		"? [a]\n: b",
		"agents: {'': {kind: llm, model: m}}",
		"mcp_servers: {f: {command: [x], env: {A: !!binary aGk=}}}",
		"mcp_servers: {w: {url: 'https://x/mcp', headers: {X-A: \"b\\tc\", Authorization: ~}, token_env: T}, v: {url: 'http://[::1]:1/', command: [x]}}",
		"schedules: {s: {kind: cron, spec: '*/5 * * * *', timezone: Europe/Berlin, catch_up: none, task: {goal: g, priority: 1, tags: [a, 2]}}}",
		"schedules: {s: {kind: event, spec: {type: task.failed, match: {agent: x, n: -0.0}}, enabled: false, task: {goal: g, input: {a: [1, 1e400, 18446744073709551616, ~, {b: 2024-01-02}]}}}}",
		"schedules: {s: {kind: heartbeat, active_hours: '08:00-22:00', stuck_after: 1h, task: &t {prompt_file: p, budget: {max_cost_usd: -0.0, max_wall_clock: 1m}}}, t: {kind: interval, spec: 1h, task: {<<: *t, goal: g, prompt_file: ~}}}",
		"schedules: {s: {kind: interval, spec: 1h, task: {goal: !!binary aGk=, input: {x: .inf}, result_route: {type: chain, task: {goal: next}}}}}",
		"schedules: {'': {kind: event, spec: '{\"type\":\"a\"}', task: {goal: g, metadata: {? [a] : b}}}}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			require.Nil(t, cfg)
			return
		}
		require.NoError(t, cfg.Validate())
		out, err := yaml.Marshal(cfg)
		require.NoError(t, err)
		again, err := Parse(out)
		require.NoError(t, err, "re-encoded:\n%s", out)
		require.Equal(t, cfg, again, "re-encoded:\n%s", out)
	})
}
