package taskrun

import "context"

// PromptOverheads is implemented by a Run whose engine keeps what agents
// learn about their prompts across tasks: the input tokens a model server
// counted for a call, under a key that names the part every prompt of the
// agent shares (its model, system prompt and tools). That count bounds
// the shared part of a later prompt, whose messages the agent bounds on
// its own, so a task's first call need not reserve a token per byte of
// every tool schema. An agent finds it with a type assertion; a Run
// without it simply teaches nothing.
type PromptOverheads interface {
	// PromptOverhead returns the figure kept under key; found is false
	// when there is none.
	PromptOverhead(ctx context.Context, key string) (tokens int64, found bool, err error)
	// LearnPromptOverhead keeps tokens under key, unless a smaller figure
	// is kept there already: each figure bounds the shared part, so the
	// least is the tightest.
	LearnPromptOverhead(ctx context.Context, key string, tokens int64) error
}
