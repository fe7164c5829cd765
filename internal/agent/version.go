package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/errandhq/errand/internal/config"
)

// Version identifies the definition of an agent as errand.yaml gives it:
// Parts holds one digest per part, so that a change can name what
// changed, and Digest covers them all. A task records the version its
// work was done under; the engine compares it when the task resumes.
type Version struct {
	Digest string
	Parts  map[string]string
}

// Names of the parts of a Version. An agent has the parts of its kind.
const (
	PartKind         = "kind"
	PartProvider     = "provider"      // llm: provider and base_url
	PartModel        = "model"         // llm: model and max_output_tokens
	PartSystemPrompt = "system_prompt" // llm
	PartMode         = "mode"          // llm
	PartMaxSteps     = "max_steps"     // llm and exec
	PartTools        = "tools"         // llm: allow and deny lists
	PartMCPServers   = "mcp_servers"   // llm: the servers its tools may come from
	PartCommand      = "command"       // exec: command and work_dir
	PartEnv          = "env"           // exec: the names of its variables
	PartCardURL      = "card_url"      // a2a: card_url and metadata
)

// partDigestLen is how many hex digits of a part's digest are kept: enough
// to tell a change, short enough to store on every task.
const partDigestLen = 16

// Versions returns the version of each agent cfg defines, by name.
func Versions(cfg *config.Config) map[string]Version {
	out := make(map[string]Version, len(cfg.Agents))
	for name, a := range cfg.Agents {
		out[name] = DefinitionVersion(a, cfg.MCPServers)
	}
	return out
}

// DefinitionVersion digests agent a's definition; servers are the
// config's mcp_servers, of which only those a's tools may come from
// count. Secrets never enter it: of environment variables, headers and
// tokens only the names do, and API keys not at all.
func DefinitionVersion(a config.Agent, servers map[string]config.MCPServer) Version {
	parts := map[string]any{PartKind: a.Kind}
	switch a.Kind {
	case config.KindLLM:
		parts[PartProvider] = []string{a.Provider, a.BaseURL}
		parts[PartModel] = []any{a.Model, a.MaxOutputTokens}
		parts[PartSystemPrompt] = a.SystemPrompt
		parts[PartMode] = a.Mode
		parts[PartMaxSteps] = a.MaxSteps
		parts[PartTools] = map[string][]string{"allow": sortedCopy(a.Tools), "deny": sortedCopy(a.ToolsDeny)}
		parts[PartMCPServers] = usableServers(a.Tools, servers)
	case config.KindExec:
		parts[PartCommand] = map[string]any{"command": a.Command, "work_dir": a.WorkDir}
		parts[PartEnv] = slices.Sorted(maps.Keys(a.Env))
		parts[PartMaxSteps] = a.MaxSteps
	case config.KindA2A:
		parts[PartCardURL] = map[string]any{"card_url": a.CardURL, "metadata": string(a.Metadata)}
	}
	v := Version{Parts: make(map[string]string, len(parts))}
	whole := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(parts)) {
		sum := digestOf(parts[name])
		v.Parts[name] = sum[:partDigestLen]
		whole.Write([]byte(name + "\x00" + sum + "\n"))
	}
	v.Digest = "sha256:" + hex.EncodeToString(whole.Sum(nil))
	return v
}

// usableServers describes the MCP servers an agent allowed tools may
// come from (every server when it allows every tool), without secrets.
func usableServers(allow []string, servers map[string]config.MCPServer) map[string]any {
	out := map[string]any{}
	for name, s := range servers {
		if len(allow) > 0 && !slices.ContainsFunc(allow, func(tool string) bool { return strings.HasPrefix(tool, name+".") }) {
			continue
		}
		out[name] = map[string]any{
			"command": s.Command, "env": slices.Sorted(maps.Keys(s.Env)), "url": s.URL,
			"headers": slices.Sorted(maps.Keys(s.Headers)), "token_env": s.TokenEnv,
		}
	}
	return out
}

// digestOf is the hex sha256 of v's JSON, whose map keys are sorted.
func digestOf(v any) string {
	// Parts are strings, numbers, and lists and maps of them: encoding
	// them cannot fail.
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func sortedCopy(s []string) []string {
	if len(s) == 0 {
		return []string{}
	}
	return slices.Sorted(slices.Values(s))
}
