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
		"a: &x [*x]",
		"- 1\n- 2",
		"workers: 1\n---\nworkers: 2",
		"? [a]\n: b",
		"agents: {'': {kind: llm, model: m}}",
		"mcp_servers: {f: {command: [x], env: {A: !!binary aGk=}}}",
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
