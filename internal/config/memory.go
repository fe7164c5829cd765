package config

import (
	"regexp"
	"time"
)

// Memory configures how far memories are trusted: how fast confidence in
// each category decays, the confidence below which recall skips a
// memory, the embeddings model of hybrid recall, and the agent that
// double-checks what the rules let through.
type Memory struct {
	// HalfLife is how long confidence in a memory of each category takes
	// to halve; a category not listed takes the "default" entry, else
	// DefaultHalfLife. 0 never decays.
	HalfLife map[string]Duration `yaml:"half_life,omitempty"`
	// MinConfidence is the floor below which recall skips a memory;
	// default 0.1, 0 keeps every memory, below 1.
	MinConfidence *float64 `yaml:"min_confidence,omitempty"`
	// Embeddings, when its model is set, gives memories a vector at write
	// time and fuses vector and full-text rankings at recall.
	Embeddings Embeddings `yaml:"embeddings,omitempty"`
	// ClassifierAgent names an llm agent (a cheap model) asked about text
	// the rules let through; empty: the rules alone.
	ClassifierAgent string `yaml:"classifier_agent,omitempty"`
}

// Embeddings is an OpenAI-compatible /v1/embeddings endpoint (Ollama's,
// say).
type Embeddings struct {
	// Provider is "openai" (any OpenAI-compatible server); default.
	Provider string `yaml:"provider,omitempty"`
	// BaseURL is the API root, e.g. http://127.0.0.1:11434/v1; empty is
	// OpenAI's public endpoint.
	BaseURL string `yaml:"base_url,omitempty"`
	// Model is the embeddings model; required.
	Model string `yaml:"model"`
	// APIKeyEnv names the environment variable holding the API key.
	APIKeyEnv string `yaml:"api_key_env,omitempty"`
}

// Defaults of memory trust.
const (
	DefaultMinConfidence = 0.1
	// DefaultHalfLife applies to a category with no half-life of its own.
	DefaultHalfLife = Duration(720 * time.Hour)
)

// DefaultHalfLives returns the half-lives of the categories errand knows:
// a fact 90 days, a preference 180, an observation 7, a task's result 30.
func DefaultHalfLives() map[string]Duration {
	return map[string]Duration{
		"fact":        Duration(2160 * time.Hour),
		"preference":  Duration(4320 * time.Hour),
		"observation": Duration(168 * time.Hour),
		"task_result": Duration(720 * time.Hour),
	}
}

// HalfLifeOf returns the half-life of a category: its own entry, the
// defaults', the "default" entry, or DefaultHalfLife.
func (m *Memory) HalfLifeOf(category string) time.Duration {
	if d, ok := m.HalfLife[category]; ok {
		return time.Duration(d)
	}
	if d, ok := DefaultHalfLives()[category]; ok {
		return time.Duration(d)
	}
	if d, ok := m.HalfLife["default"]; ok {
		return time.Duration(d)
	}
	return time.Duration(DefaultHalfLife)
}

// MinConfidenceOr returns the configured floor or the default.
func (m *Memory) MinConfidenceOr() float64 {
	if m.MinConfidence != nil {
		return *m.MinConfidence
	}
	return DefaultMinConfidence
}

// categoryRE is what a memory category may look like.
var categoryRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// ValidCategory reports whether s can name a memory category: lower-case
// letters, digits and '_', starting with a letter, at most 64.
func ValidCategory(s string) bool { return categoryRE.MatchString(s) }

func (m Memory) validate(p *problems, agents map[string]Agent) {
	for _, cat := range sortedKeys(m.HalfLife) {
		if cat != "default" && !ValidCategory(cat) {
			p.add("memory.half_life", "%q is not a category name: use lower-case letters, digits and '_'", cat)
			continue
		}
		p.check("memory.half_life."+cat, atLeast(m.HalfLife[cat], 0))
	}
	if c := m.MinConfidence; c != nil && (*c < 0 || *c >= 1) {
		p.add("memory.min_confidence", "%v is out of range: at least 0 and below 1", *c)
	}
	if e := m.Embeddings; e != (Embeddings{}) {
		if e.Provider != "" && e.Provider != "openai" {
			p.add("memory.embeddings.provider", "%q is not openai (any OpenAI-compatible server)", e.Provider)
		}
		if e.Model == "" {
			p.add("memory.embeddings.model", "is required")
		}
		if e.BaseURL != "" {
			p.check("memory.embeddings.base_url", checkHTTPURL(e.BaseURL))
		}
		if e.APIKeyEnv != "" {
			p.check("memory.embeddings.api_key_env", checkEnvName(e.APIKeyEnv))
		}
	}
	if name := m.ClassifierAgent; name != "" {
		if a, ok := agents[name]; !ok {
			p.add("memory.classifier_agent", "%q is not an agent in agents", name)
		} else if a.Kind != "llm" {
			p.add("memory.classifier_agent", "%q is a %s agent; the classifier must be an llm agent", name, a.Kind)
		}
	}
}
