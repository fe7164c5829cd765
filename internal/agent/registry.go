package agent

import (
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/errandhq/errand/internal/config"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/taskrun"
)

// FromConfig builds the agents named in the configuration's agents map,
// with the pricing table for llm agents. getenv reads API keys named by
// api_key_env; a named variable that is unset is an error, so a daemon does
// not start with an agent that cannot authenticate.
func FromConfig(cfg *config.Config, getenv func(string) (string, bool), httpClient *http.Client) (map[string]taskrun.Handler, error) {
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
		h, err := build(cfg.Agents[name], pricing, getenv, httpClient)
		if err != nil {
			return nil, fmt.Errorf("agents.%s: %w", name, err)
		}
		handlers[name] = h
	}
	return handlers, nil
}

func build(a config.Agent, pricing provider.Pricing, getenv func(string) (string, bool), httpClient *http.Client) (taskrun.Handler, error) {
	switch a.Kind {
	case config.KindExec:
		return NewExec(ExecConfig{
			Command: a.Command, Env: a.Env, WorkDir: a.WorkDir,
			MaxSteps: a.MaxSteps, StepTimeout: time.Duration(a.StepTimeout),
		})
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
			Policy: Policy{Allow: a.Tools, Deny: a.ToolsDeny}, Mode: a.Mode,
		})
	}
	return nil, fmt.Errorf("kind %q is not llm or exec", a.Kind)
}
