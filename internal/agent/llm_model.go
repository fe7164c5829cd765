package agent

// Model is the model the agent calls, for listings of agents.
func (a *LLM) Model() string { return a.cfg.Model }
