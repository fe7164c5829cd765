package daemon

import (
	"context"
	"errors"
	"fmt"

	"github.com/errandhq/errand"
)

// unconfiguredAgent stands in for the default agent when errand.yaml names
// none, so that `errand serve` starts with no config at all and a task
// that needs a model fails saying exactly what to set.
func unconfiguredAgent(configPath string) errand.Agent {
	msg := fmt.Sprintf("no model is configured for the agent \"default\": add agents.default to %s, e.g.\n"+
		"agents:\n  default:\n    kind: llm\n    provider: openai          # any OpenAI-compatible server, or anthropic\n"+
		"    base_url: http://127.0.0.1:11434/v1   # Ollama; omit for api.openai.com\n"+
		"    model: llama3.2\n    api_key_env: OPENAI_API_KEY   # the variable holding the key, if the server needs one\n"+
		"then restart errand serve", configPath)
	return errand.AgentFunc(func(context.Context, *errand.TaskRun) (errand.Result, error) {
		return errand.Result{}, errand.NonRetryable("agent_not_configured", errors.New(msg))
	})
}
