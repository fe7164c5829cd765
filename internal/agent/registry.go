package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/errandhq/errand/internal/a2a/remote"
	"github.com/errandhq/errand/internal/config"
	"github.com/errandhq/errand/internal/mcpclient"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/taskrun"
)

// FromConfig builds the agents named in the configuration's agents map,
// with the pricing table for llm agents. getenv reads API keys named by
// api_key_env; a named variable that is unset is an error, so a daemon does
// not start with an agent that cannot authenticate. tools, when not nil,
// offers more tools to every llm agent: the mcp_servers' (see MCPTools).
func FromConfig(cfg *config.Config, getenv func(string) (string, bool), httpClient *http.Client, tools ToolSource) (map[string]taskrun.Handler, error) {
	pricing := provider.Pricing{}
	for model, p := range cfg.Pricing {
		pricing[model] = provider.Price{InputPerMTok: p.InputPerMTok, OutputPerMTok: p.OutputPerMTok}
	}
	names := make([]string, 0, len(cfg.Agents))
	for name := range cfg.Agents {
		names = append(names, name)
	}
	sort.Strings(names)
	handlers := make(map[string]taskrun.Handler, len(names))
	for _, name := range names {
		h, err := build(cfg.Agents[name], pricing, getenv, httpClient, tools)
		if err != nil {
			return nil, fmt.Errorf("agents.%s: %w", name, err)
		}
		handlers[name] = h
	}
	return handlers, nil
}

func build(a config.Agent, pricing provider.Pricing, getenv func(string) (string, bool), httpClient *http.Client, tools ToolSource) (taskrun.Handler, error) {
	switch a.Kind {
	case config.KindExec:
		return NewExec(ExecConfig{
			Command: a.Command, Env: a.Env, WorkDir: a.WorkDir,
			MaxSteps: a.MaxSteps, StepTimeout: time.Duration(a.StepTimeout),
		})
	case config.KindA2A:
		var token string
		if a.TokenEnv != "" {
			v, ok := getenv(a.TokenEnv)
			if !ok || v == "" {
				return nil, fmt.Errorf("token_env: %s is not set", a.TokenEnv)
			}
			token = v
		}
		return remote.New(remote.Config{CardURL: a.CardURL, Token: token, Metadata: json.RawMessage(a.Metadata), HTTPClient: httpClient})
	case config.KindLLM:
		var key string
		if a.APIKeyEnv != "" {
			v, ok := getenv(a.APIKeyEnv)
			if !ok || v == "" {
				return nil, fmt.Errorf("api_key_env: %s is not set", a.APIKeyEnv)
			}
			key = v
		}
		var p provider.Provider
		switch a.Provider {
		case config.ProviderAnthropic:
			p = provider.NewAnthropic(provider.AnthropicConfig{BaseURL: a.BaseURL, APIKey: key, HTTPClient: httpClient})
		default:
			p = provider.NewOpenAI(provider.OpenAIConfig{BaseURL: a.BaseURL, APIKey: key, HTTPClient: httpClient})
		}
		return NewLLM(LLMConfig{
			Provider: p, Model: a.Model, SystemPrompt: a.SystemPrompt, MaxSteps: a.MaxSteps,
			StepTimeout: time.Duration(a.StepTimeout), MaxOutputTokens: a.MaxOutputTokens, Pricing: pricing,
			Policy: Policy{Allow: a.Tools, Deny: a.ToolsDeny}, Mode: a.Mode, ToolSource: tools,
		})
	}
	return nil, fmt.Errorf("kind %q is not llm, exec or a2a", a.Kind)
}

// MCPTools offers the tools of the MCP servers m manages, named
// "server.tool".
func MCPTools(m *mcpclient.Manager) ToolSource { return mcpTools{m} }

type mcpTools struct{ m *mcpclient.Manager }

func (s mcpTools) Tools(ctx context.Context, want func(server string) bool) ([]Tool, error) {
	tools, err := s.m.Tools(ctx, want)
	if err != nil {
		return nil, err
	}
	out := make([]Tool, len(tools))
	for i, t := range tools {
		out[i] = t
	}
	return out, nil
}
