package agent

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/config"
)

func llmAgent() config.Agent {
	a := config.NewAgent(config.KindLLM)
	a.Model, a.SystemPrompt, a.BaseURL, a.APIKeyEnv = "m1", "Be careful.", "http://127.0.0.1:1/v1", "KEY_ONE"
	a.Tools = []string{"files.read", "web_fetch"}
	return a
}

var testServers = map[string]config.MCPServer{
	"files": {Command: []string{"mcp-files", "/srv"}, Env: map[string]string{"FILES_TOKEN": "secret-1"}},
	"web":   {URL: "https://mcp.example/", Headers: map[string]string{"X-Key": "secret-2"}, TokenEnv: "WEB_TOKEN"},
}

// changedParts names the parts whose digests differ.
func changedParts(a, b Version) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(a.Parts)) {
		if a.Parts[name] != b.Parts[name] {
			out = append(out, name)
		}
	}
	for name := range b.Parts {
		if _, ok := a.Parts[name]; !ok {
			out = append(out, name)
		}
	}
	return out
}

func TestDefinitionVersion(t *testing.T) {
	t.Parallel()
	base := DefinitionVersion(llmAgent(), testServers)
	require.True(t, strings.HasPrefix(base.Digest, "sha256:"), base.Digest)
	require.Len(t, base.Digest, len("sha256:")+64)
	require.ElementsMatch(t, []string{"kind", "provider", "model", "system_prompt", "mode", "max_steps", "tools", "mcp_servers"},
		slices.Collect(maps.Keys(base.Parts)))
	require.Equal(t, base, DefinitionVersion(llmAgent(), testServers), "the same definition, the same version")

	for _, tc := range []struct {
		name    string
		change  func(a *config.Agent, servers map[string]config.MCPServer)
		changed []string // nil: the version stays
	}{
		{"SystemPrompt", func(a *config.Agent, _ map[string]config.MCPServer) { a.SystemPrompt = "Be bold." }, []string{"system_prompt"}},
		{"Model", func(a *config.Agent, _ map[string]config.MCPServer) { a.Model = "m2" }, []string{"model"}},
		{"MaxOutputTokens", func(a *config.Agent, _ map[string]config.MCPServer) { a.MaxOutputTokens = 99 }, []string{"model"}},
		{"BaseURL", func(a *config.Agent, _ map[string]config.MCPServer) { a.BaseURL = "http://other/v1" }, []string{"provider"}},
		{"Provider", func(a *config.Agent, _ map[string]config.MCPServer) { a.Provider = config.ProviderAnthropic }, []string{"provider"}},
		{"Mode", func(a *config.Agent, _ map[string]config.MCPServer) { a.Mode = config.ModePlanExecute }, []string{"mode"}},
		{"MaxSteps", func(a *config.Agent, _ map[string]config.MCPServer) { a.MaxSteps = 3 }, []string{"max_steps"}},
		{"ToolsDeny", func(a *config.Agent, _ map[string]config.MCPServer) { a.ToolsDeny = []string{"shell"} }, []string{"tools"}},
		{"ToolsAllowWidened", func(a *config.Agent, _ map[string]config.MCPServer) { a.Tools = nil }, []string{"tools", "mcp_servers"}},
		{"UsableServerCommand", func(_ *config.Agent, s map[string]config.MCPServer) {
			s["files"] = config.MCPServer{Command: []string{"mcp-files", "/elsewhere"}}
		}, []string{"mcp_servers"}},
		{"UsableServerEnvName", func(_ *config.Agent, s map[string]config.MCPServer) {
			s["files"] = config.MCPServer{Command: []string{"mcp-files", "/srv"}, Env: map[string]string{"OTHER": "secret-1"}}
		}, []string{"mcp_servers"}},
		// What is not part of the definition, or is a secret, leaves it.
		{"ToolsReordered", func(a *config.Agent, _ map[string]config.MCPServer) { a.Tools = []string{"web_fetch", "files.read"} }, nil},
		{"APIKeyEnv", func(a *config.Agent, _ map[string]config.MCPServer) { a.APIKeyEnv = "KEY_TWO" }, nil},
		{"StepTimeout", func(a *config.Agent, _ map[string]config.MCPServer) { a.StepTimeout *= 2 }, nil},
		{"ServerSecretValue", func(_ *config.Agent, s map[string]config.MCPServer) {
			s["files"] = config.MCPServer{Command: []string{"mcp-files", "/srv"}, Env: map[string]string{"FILES_TOKEN": "secret-9"}}
		}, nil},
		{"ServerItMayNotUse", func(_ *config.Agent, s map[string]config.MCPServer) {
			s["web"] = config.MCPServer{URL: "https://other/"}
		}, nil},
		{"NewServerItMayNotUse", func(_ *config.Agent, s map[string]config.MCPServer) { s["db"] = config.MCPServer{URL: "https://db/"} }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, servers := llmAgent(), maps.Clone(testServers)
			tc.change(&a, servers)
			got := DefinitionVersion(a, servers)
			require.ElementsMatch(t, tc.changed, changedParts(base, got))
			if tc.changed == nil {
				require.Equal(t, base.Digest, got.Digest)
			} else {
				require.NotEqual(t, base.Digest, got.Digest)
			}
		})
	}
}

func TestDefinitionVersionOfOtherKinds(t *testing.T) {
	t.Parallel()
	exec := config.NewAgent(config.KindExec)
	exec.Command, exec.Env = []string{"./agent.sh"}, map[string]string{"API_TOKEN": "secret-value"}
	v := DefinitionVersion(exec, testServers)
	require.ElementsMatch(t, []string{"kind", "command", "env", "max_steps"}, slices.Collect(maps.Keys(v.Parts)))
	exec.Env = map[string]string{"API_TOKEN": "another-secret"}
	require.Equal(t, v, DefinitionVersion(exec, testServers), "only the variables' names count")
	exec.WorkDir = "/srv/agent"
	require.Equal(t, []string{"command"}, changedParts(v, DefinitionVersion(exec, testServers)))

	remote := config.NewAgent(config.KindA2A)
	remote.CardURL, remote.TokenEnv = "https://peer/.well-known/agent-card.json", "PEER_TOKEN"
	r := DefinitionVersion(remote, testServers)
	require.ElementsMatch(t, []string{"kind", "card_url"}, slices.Collect(maps.Keys(r.Parts)))
	remote.TokenEnv = "OTHER_TOKEN"
	require.Equal(t, r, DefinitionVersion(remote, testServers))
	remote.Metadata = config.JSONObject(`{"agent":"researcher"}`)
	require.Equal(t, []string{"card_url"}, changedParts(r, DefinitionVersion(remote, testServers)))

	require.NotEqual(t, v.Digest, DefinitionVersion(llmAgent(), nil).Digest)
}

func TestVersionsOfConfig(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte(`
mcp_servers:
  files: {command: ["mcp-files"]}
agents:
  default: {kind: llm, model: m1, system_prompt: "Be careful."}
  shell: {kind: exec, command: ["./agent.sh"]}
`))
	require.NoError(t, err)
	versions := Versions(cfg)
	require.Len(t, versions, 2)
	require.Equal(t, DefinitionVersion(cfg.Agents["default"], cfg.MCPServers), versions["default"])
	require.Equal(t, DefinitionVersion(cfg.Agents["shell"], cfg.MCPServers), versions["shell"])
}

// FuzzDefinitionVersion: a version never holds the prompt's text, and a
// prompt's change shows in its part alone.
func FuzzDefinitionVersion(f *testing.F) {
	f.Add("Be careful.", "Be bold.")
	f.Add("", "sha256:")
	f.Fuzz(func(t *testing.T, prompt, other string) {
		if !utf8.ValidString(prompt) || !utf8.ValidString(other) {
			t.Skip("a configuration's text is UTF-8: its YAML parser refuses anything else")
		}
		a := llmAgent()
		a.SystemPrompt = prompt
		v := DefinitionVersion(a, testServers)
		a.SystemPrompt = other
		w := DefinitionVersion(a, testServers)
		if prompt == other {
			require.Equal(t, v, w)
			return
		}
		require.Equal(t, []string{"system_prompt"}, changedParts(v, w))
		if len(prompt) >= 8 {
			for _, d := range v.Parts {
				require.NotContains(t, d, prompt)
			}
		}
	})
}
