package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net"
	"net/textproto"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// FieldError is one problem with a configuration value.
type FieldError struct {
	// Path is the key path, like "agents.shell.command" or
	// "webhooks[0].url", or for an environment override the variable's
	// name; empty for the file as a whole.
	Path string
	// Line is the 1-based line in the file, or 0 when not known (values
	// checked after decoding, environment variables).
	Line int
	// Message says what is wrong, e.g. "must be at least 1".
	Message string
}

// Error returns "path: message", with " (line N)" when the line is known.
func (e *FieldError) Error() string {
	s := e.Message
	if e.Path != "" {
		s = e.Path + ": " + s
	}
	if e.Line > 0 {
		s += fmt.Sprintf(" (line %d)", e.Line)
	}
	return s
}

// FieldErrors returns every *FieldError in err's tree, in order; nil if
// there is none.
func FieldErrors(err error) []*FieldError {
	var out []*FieldError
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *FieldError:
			out = append(out, e)
		case interface{ Unwrap() []error }:
			for _, err := range e.Unwrap() {
				walk(err)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return out
}

// problems collects FieldErrors.
type problems []error

func (p *problems) add(path, format string, args ...any) {
	*p = append(*p, &FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
}

// check adds msg at path unless it is empty.
func (p *problems) check(path, msg string) {
	if msg != "" {
		*p = append(*p, &FieldError{Path: path, Message: msg})
	}
}

// Validate checks every value and returns all problems joined, each a
// *FieldError naming its key path, or nil.
func (c *Config) Validate() error {
	var p problems
	p.check("listen", checkListen(c.Listen))
	p.check("store", checkStore(c.Store))
	p.check("durability", checkDurability(c.Durability))
	p.check("workers", checkWorkers(c.Workers))
	p.check("lease_ttl", checkLeaseTTL(c.LeaseTTL))
	p.check("max_subtask_depth", checkMaxSubtaskDepth(c.MaxSubtaskDepth))
	p.check("heartbeat_interval", atLeast(c.HeartbeatInterval, time.Second))
	for _, name := range sortedKeys(c.Agents) {
		c.Agents[name].validate(&p, "agents."+name, name)
	}
	for _, model := range sortedKeys(c.Pricing) {
		path := "pricing." + model
		if strings.TrimSpace(model) == "" {
			p.add("pricing", "model names must not be empty")
			continue
		}
		price := c.Pricing[model]
		p.check(path+".input_per_mtok", amount(price.InputPerMTok))
		p.check(path+".output_per_mtok", amount(price.OutputPerMTok))
	}
	for _, model := range sortedKeys(c.RateLimits) {
		c.RateLimits[model].validate(&p, model)
	}
	for _, key := range sortedKeys(c.Concurrency) {
		checkConcurrency(&p, key, c.Concurrency[key], c.Agents)
	}
	c.Budget.validate(&p)
	for i, w := range c.Webhooks {
		w.validate(&p, fmt.Sprintf("webhooks[%d]", i))
	}
	for _, name := range sortedKeys(c.MCPServers) {
		path := "mcp_servers." + name
		if !mcpNameRE.MatchString(name) {
			p.add("mcp_servers", "%q is not a valid server name: use letters, digits, '-' and '_'", name)
			continue
		}
		c.MCPServers[name].validate(&p, path)
	}
	p.check("retention", atLeast(c.Retention, 0))
	p.check("memory_retention", atLeast(c.MemoryRetention, 0))
	c.MemoryLimits.validate(&p)
	c.Memory.validate(&p, c.Agents)
	if c.Lanes != "" && c.Lanes != "session" && c.Lanes != "none" {
		p.add("lanes", "%q is not session or none", c.Lanes)
	}
	if c.OnAgentChange != OnAgentChangeContinue && c.OnAgentChange != OnAgentChangeFail {
		p.add("on_agent_change", "%q is not %s or %s", c.OnAgentChange, OnAgentChangeContinue, OnAgentChangeFail)
	}
	for _, name := range sortedKeys(c.Schedules) {
		c.Schedules[name].validate(&p, "schedules."+name, name)
		if to := c.Schedules[name].EscalateTo; to != "" && to != "default" {
			if _, ok := c.Agents[to]; !ok {
				p.add("schedules."+name+".escalate_to", "%q is not an agent in agents", to)
			}
		}
	}
	if c.A2A.BaseURL != "" {
		p.check("a2a.base_url", checkHTTPURL(c.A2A.BaseURL))
	}
	if name := c.A2A.DefaultAgent; name != "" && name != "default" {
		if _, ok := c.Agents[name]; !ok {
			p.add("a2a.default_agent", "%q is not an agent in agents", name)
		}
	}
	if c.Auth.TokenEnv != "" {
		p.check("auth.token_env", checkEnvName(c.Auth.TokenEnv))
	}
	c.Telemetry.validate(&p)
	return errors.Join(p...)
}

var (
	agentNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	mcpNameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)
	envNameRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	eventRE     = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`)
)

func (a Agent) validate(p *problems, path, name string) {
	if !agentNameRE.MatchString(name) {
		p.add("agents", "%q is not a valid agent name: use letters, digits, '-', '_' and '.'", name)
		return
	}
	llmKeys := []agentKey{
		{"provider", a.Provider != ""}, {"base_url", a.BaseURL != ""}, {"model", a.Model != ""},
		{"api_key_env", a.APIKeyEnv != ""}, {"system_prompt", a.SystemPrompt != ""}, {"mode", a.Mode != ""},
		{"tools", len(a.Tools) > 0}, {"tools_deny", len(a.ToolsDeny) > 0}, {"max_output_tokens", a.MaxOutputTokens != 0},
	}
	execKeys := []agentKey{{"command", len(a.Command) > 0}, {"env", len(a.Env) > 0}, {"work_dir", a.WorkDir != ""}}
	a2aKeys := []agentKey{{"card_url", a.CardURL != ""}, {"token_env", a.TokenEnv != ""}, {"metadata", len(a.Metadata) > 0}}
	switch a.Kind {
	case "":
		p.add(path+".kind", "required: llm, exec or a2a")
	case KindLLM:
		if a.Model == "" {
			p.add(path+".model", "required for kind llm")
		}
		if a.Provider != ProviderOpenAI && a.Provider != ProviderAnthropic {
			p.add(path+".provider", "%q is not openai or anthropic", a.Provider)
		}
		if a.BaseURL != "" {
			p.check(path+".base_url", checkHTTPURL(a.BaseURL))
		}
		if a.APIKeyEnv != "" {
			p.check(path+".api_key_env", checkEnvName(a.APIKeyEnv))
		}
		if a.Mode != ModeReact && a.Mode != ModePlanExecute {
			p.add(path+".mode", "%q is not react or plan_execute", a.Mode)
		}
		for i, tool := range a.Tools {
			if strings.TrimSpace(tool) == "" {
				p.add(fmt.Sprintf("%s.tools[%d]", path, i), "must not be empty")
			}
		}
		for i, tool := range a.ToolsDeny {
			if strings.TrimSpace(tool) == "" {
				p.add(fmt.Sprintf("%s.tools_deny[%d]", path, i), "must not be empty")
			}
		}
		if a.MaxOutputTokens < 0 {
			p.add(path+".max_output_tokens", "must not be negative")
		}
		onlyFor(p, path, KindExec, execKeys)
		onlyFor(p, path, KindA2A, a2aKeys)
	case KindExec:
		checkCommand(p, path+".command", a.Command, "for kind exec")
		checkEnv(p, path+".env", a.Env)
		onlyFor(p, path, KindLLM, llmKeys)
		onlyFor(p, path, KindA2A, a2aKeys)
	case KindA2A:
		if a.CardURL == "" {
			p.add(path+".card_url", "required for kind a2a: the remote agent's card, e.g. https://host/.well-known/agent-card.json")
		} else {
			p.check(path+".card_url", checkHTTPURL(a.CardURL))
		}
		if a.TokenEnv != "" {
			p.check(path+".token_env", checkEnvName(a.TokenEnv))
		}
		onlyFor(p, path, KindLLM, llmKeys)
		onlyFor(p, path, KindExec, execKeys)
	default:
		p.add(path+".kind", "%q is not llm, exec or a2a", a.Kind)
	}
	if a.MaxSteps < 1 {
		p.add(path+".max_steps", "must be at least 1")
	}
	if a.StepTimeout <= 0 {
		p.add(path+".step_timeout", "must be positive")
	}
}

// agentKey is a key of an agent's config, and whether it is set.
type agentKey struct {
	name string
	set  bool
}

// onlyFor refuses the keys that are set but belong to another kind.
func onlyFor(p *problems, path, kind string, keys []agentKey) {
	for _, k := range keys {
		if k.set {
			p.add(path+"."+k.name, "only for kind %s", kind)
		}
	}
}

// transportHeaders are set by the MCP transport itself: a value in
// headers would be overwritten or would break the protocol.
var transportHeaders = []string{"Accept", "Content-Length", "Content-Type", "Host", "Last-Event-Id", "Mcp-Protocol-Version", "Mcp-Session-Id"}

func (s MCPServer) validate(p *problems, path string) {
	switch {
	case len(s.Command) > 0 && s.URL != "":
		p.add(path, "set command or url, not both")
	case len(s.Command) == 0 && s.URL == "":
		p.add(path, "set command (a server errand starts and talks to over stdio) or url (a Streamable HTTP server)")
	case len(s.Command) > 0:
		checkCommand(p, path+".command", s.Command, "")
		checkEnv(p, path+".env", s.Env)
		if len(s.Headers) > 0 {
			p.add(path+".headers", "only for a url server")
		}
		if s.TokenEnv != "" {
			p.add(path+".token_env", "only for a url server")
		}
	default:
		p.check(path+".url", checkHTTPURL(s.URL))
		if len(s.Env) > 0 {
			p.add(path+".env", "only for a command server")
		}
		for _, k := range sortedKeys(s.Headers) {
			canonical := textproto.CanonicalMIMEHeaderKey(k)
			switch {
			case !validHeaderName(k):
				p.add(path+".headers", "%q is not a valid HTTP header name", k)
			case slices.Contains(transportHeaders, canonical):
				p.add(path+".headers."+k, "is set by the MCP transport")
			case canonical == "Authorization" && s.TokenEnv != "":
				p.add(path+".headers."+k, "set Authorization here or token_env, not both")
			case !validHeaderValue(s.Headers[k]):
				p.add(path+".headers."+k, "has a control character or is not valid UTF-8")
			}
		}
		if s.TokenEnv != "" {
			p.check(path+".token_env", checkEnvName(s.TokenEnv))
		}
	}
}

// validHeaderName reports whether s is an HTTP field name: one or more
// token characters (RFC 9110).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue refuses what would split or corrupt a request: control
// characters other than tab, and invalid UTF-8.
func validHeaderValue(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if (r < ' ' && r != '\t') || r == 0x7f {
			return false
		}
	}
	return true
}

// Bounds of a memory limit, as the engine has them.
const (
	maxMemoryTokens  = 1_000_000
	maxMemoryEntries = 1000
)

func (m MemoryLimits) validate(p *problems) {
	for _, l := range []struct {
		name  string
		limit MemoryLimit
	}{{"user", m.User}, {"agent", m.Agent}, {"schedule", m.Schedule}, {"event", m.Event}, {"heartbeat", m.Heartbeat}} {
		path := "memory_limits." + l.name
		if l.limit.MaxTokens < 0 || l.limit.MaxTokens > maxMemoryTokens {
			p.add(path+".max_tokens", "%d is out of range 0–%d", l.limit.MaxTokens, maxMemoryTokens)
		}
		if l.limit.MaxEntries < 0 || l.limit.MaxEntries > maxMemoryEntries {
			p.add(path+".max_entries", "%d is out of range 0–%d", l.limit.MaxEntries, maxMemoryEntries)
		}
	}
}

func (b Budget) validate(p *problems) {
	if b.Task.MaxTokens < 0 {
		p.add("budget.task.max_tokens", "must not be negative")
	}
	p.check("budget.task.max_cost_usd", amount(b.Task.MaxCostUSD))
	p.check("budget.task.max_wall_clock", atLeast(b.Task.MaxWallClock, 0))
	if b.Task.MaxToolCalls < 0 {
		p.add("budget.task.max_tool_calls", "must not be negative")
	}
	p.check("budget.daily_usd", amount(b.DailyUSD))
	p.check("budget.monthly_usd", amount(b.MonthlyUSD))
	for i, t := range b.AlertThresholds {
		if math.IsNaN(t) || t <= 0 || t > 1 {
			p.add(fmt.Sprintf("budget.alert_thresholds[%d]", i), "must be greater than 0 and at most 1")
		}
	}
	if b.Timezone != "" {
		if _, err := time.LoadLocation(b.Timezone); err != nil {
			p.add("budget.timezone", "%q is not an IANA time zone", b.Timezone)
		}
	}
	switch b.OnLimit {
	case OnLimitPauseAll, OnLimitPauseNonCritical, OnLimitAlertOnly:
	default:
		p.add("budget.on_limit", "%q is not pause-all, pause-non-critical or alert-only", b.OnLimit)
	}
}

func (w Webhook) validate(p *problems, path string) {
	p.check(path+".url", checkWebhookURL(w.URL))
	switch {
	case w.Secret != "" && w.SecretEnv != "":
		p.add(path, "set secret or secret_env, not both")
	case strings.HasPrefix(w.Secret, "whsec_"):
		// The same rules as webhook.Key, which a secret_env value meets
		// at start.
		if key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(w.Secret, "whsec_")); err != nil {
			p.add(path+".secret", "the part after whsec_ is not valid base64")
		} else if len(key) == 0 {
			p.add(path+".secret", "the part after whsec_ is empty")
		}
	case w.SecretEnv != "":
		p.check(path+".secret_env", checkEnvName(w.SecretEnv))
	}
	for i, e := range w.Events {
		if e != "*" && !eventRE.MatchString(e) {
			p.add(fmt.Sprintf("%s.events[%d]", path, i), "%q is not an event type like task.completed", e)
		}
	}
}

// IsLoopback reports whether the host of a host:port listen address is
// a loopback address (localhost, 127.0.0.0/8, ::1). An empty host or a
// wildcard listens on every interface, so it is not.
func IsLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// The checks below return "" for a good value, else the message. ApplyEnv
// shares them, naming the variable instead of the key.

func checkListen(s string) string {
	if s == "" {
		return "required: host:port"
	}
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Sprintf("%q is not host:port", s)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || strconv.FormatUint(n, 10) != port {
		return fmt.Sprintf("%q is not host:port: the port must be a number from 0 to 65535", s)
	}
	return ""
}

func checkStore(s string) string {
	switch {
	case s == "":
		return `required: "sqlite", a SQLite path or sqlite:// URL, or a postgres:// URL`
	case s == StoreSQLite:
		return ""
	case s == "postgres" || s == "postgresql":
		return fmt.Sprintf("%q needs a URL like postgres://user@host:5432/db", s)
	case strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://"):
		// The URL may hold a password: never echo it.
		if _, err := url.Parse(s); err != nil {
			var uerr *url.Error
			if errors.As(err, &uerr) {
				err = uerr.Err
			}
			return fmt.Sprintf("not a valid postgres URL: %v", err)
		}
		return ""
	case strings.HasPrefix(s, "sqlite://"), strings.HasPrefix(s, "sqlite:"):
		rest := strings.TrimPrefix(strings.TrimPrefix(s, "sqlite:"), "//")
		if rest == "" {
			return fmt.Sprintf("%q names no file", s)
		}
		return ""
	case strings.Contains(s, "://"):
		scheme, _, _ := strings.Cut(s, "://")
		return fmt.Sprintf("%q is not a store: use sqlite, a SQLite path or sqlite:// URL, or a postgres:// URL", scheme+"://…")
	}
	return ""
}

func checkDurability(s string) string {
	if s != DurabilityNormal && s != DurabilityFull {
		return fmt.Sprintf("%q is not normal or full", s)
	}
	return ""
}

func checkWorkers(n int) string {
	if n < 1 {
		return "must be at least 1"
	}
	return ""
}

func checkLeaseTTL(d Duration) string { return atLeast(d, time.Second) }

func checkMaxSubtaskDepth(n int) string {
	if n < 0 {
		return "must not be negative"
	}
	return ""
}

func atLeast(d Duration, low time.Duration) string {
	switch {
	case low <= 0 && d < 0:
		return "must not be negative"
	case time.Duration(d) < low:
		return "must be at least " + low.String()
	}
	return ""
}

// amount checks a USD amount or price: finite, not negative.
func amount(f float64) string {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return "must be a finite number"
	case f < 0:
		return "must not be negative"
	}
	return ""
}

func checkEnvName(s string) string {
	if !envNameRE.MatchString(s) {
		return fmt.Sprintf("%q is not a valid environment variable name", s)
	}
	return ""
}

func checkCommand(p *problems, path string, cmd []string, kind string) {
	if len(cmd) == 0 {
		p.add(path, "%s", strings.TrimSpace("required "+kind))
		return
	}
	if strings.TrimSpace(cmd[0]) == "" {
		p.add(path+"[0]", "must name a program")
	}
}

func checkEnv(p *problems, path string, env map[string]string) {
	for _, k := range sortedKeys(env) {
		if msg := checkEnvName(k); msg != "" {
			p.add(path, "%s", msg)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
