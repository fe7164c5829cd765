package store

import (
	"context"
	"errors"
	"time"
)

// OverheadStore keeps what llm agents learn about their prompts: for a key
// naming what every first prompt of an agent shares (the agent, its
// model, system prompt and tools, digested by the agent), the least input
// tokens a model server reported for a call with that shared part. The
// count bounds the shared part of later prompts from above, so a task's
// first call need not reserve a token per byte of every tool schema. A
// changed definition makes another key; an old key is simply never read
// again.
type OverheadStore interface {
	// PromptOverheadGet returns the overhead kept under key, or
	// ErrNotFound.
	PromptOverheadGet(ctx context.Context, key string) (*PromptOverhead, error)

	// PromptOverheadRecord keeps Tokens under Key unless a figure no
	// larger is kept there already, and returns what is kept then: each
	// figure is an upper bound, so the least is the tightest. UpdatedAt
	// moves only when Tokens is kept. A Key that is empty or longer than
	// MaxPromptOverheadKey, or Tokens that are not positive, are an error
	// and nothing is written. Retrying is safe.
	PromptOverheadRecord(ctx context.Context, params *PromptOverheadRecordParams) (*PromptOverhead, error)
}

// MaxPromptOverheadKey bounds the length of a prompt overhead's key.
const MaxPromptOverheadKey = 256

// PromptOverhead is a learned bound of the input tokens of a prompt's
// shared part.
type PromptOverhead struct {
	Key       string
	Agent     string // the agent whose call taught it, for operators
	Tokens    int64
	UpdatedAt time.Time
}

// PromptOverheadRecordParams is a count to keep.
type PromptOverheadRecordParams struct {
	Key    string
	Agent  string
	Tokens int64
	Now    *time.Time
}

// Validate reports a key that is empty or too long, or tokens that are not
// positive. Drivers call it before writing.
func (p *PromptOverheadRecordParams) Validate() error {
	switch {
	case p.Key == "":
		return errors.New("a key is required")
	case len(p.Key) > MaxPromptOverheadKey:
		return errors.New("the key is longer than 256 bytes")
	case p.Tokens <= 0:
		return errors.New("tokens must be positive")
	}
	return nil
}
