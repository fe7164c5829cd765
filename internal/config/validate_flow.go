package config

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxConcurrencyKeyBytes bounds a concurrency key, as the engine bounds
// a task's.
const maxConcurrencyKeyBytes = 200

// checkConcurrency checks one entry of concurrency: a key a task can hold
// and a limit; an agent:NAME key must name a configured agent, or it
// would cap nothing.
func checkConcurrency(p *problems, key string, limit int, agents map[string]Agent) {
	path := "concurrency." + key
	switch {
	case strings.TrimSpace(key) == "":
		p.add("concurrency", "keys must not be empty")
		return
	case !utf8.ValidString(key):
		p.add("concurrency", "key %q is not valid UTF-8", key)
		return
	case len(key) > maxConcurrencyKeyBytes:
		p.add("concurrency", "key %.40q… is %d bytes; the limit is %d", key, len(key), maxConcurrencyKeyBytes)
		return
	}
	for i, r := range key {
		if unicode.IsControl(r) {
			p.add("concurrency", "key %q holds the control character %U at byte %d", key, r, i)
			return
		}
	}
	if limit < 0 {
		p.add(path, "%d must not be negative (0 runs none, leave the key out for no limit)", limit)
	}
	if name, ok := strings.CutPrefix(key, "agent:"); ok && name != "default" {
		if _, known := agents[name]; !known {
			p.add(path, "%q is not an agent in agents", name)
		}
	}
}

func (r RateLimit) validate(p *problems, model string) {
	if strings.TrimSpace(model) == "" {
		p.add("rate_limits", "model names must not be empty")
		return
	}
	path := "rate_limits." + model
	if r.RequestsPerMinute < 0 {
		p.add(path+".requests_per_minute", "must not be negative")
	}
	if r.TokensPerMinute < 0 {
		p.add(path+".tokens_per_minute", "must not be negative")
	}
	if r.RequestsPerMinute == 0 && r.TokensPerMinute == 0 {
		p.add(path, "set requests_per_minute or tokens_per_minute above 0 (or leave the model out)")
	}
}
