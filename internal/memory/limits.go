package memory

import (
	"fmt"
	"strings"

	"github.com/errandhq/errand/store"
)

// Bounds of memories.
const (
	// MaxTextBytes bounds a memory's text.
	MaxTextBytes = 64 << 10
	// MaxTags bounds a memory's tags, and MaxTagRunes each tag.
	MaxTags     = 20
	MaxTagRunes = 64
	// MaxQueryBytes bounds a search or recall query.
	MaxQueryBytes = 2048
	// MaxTokensLimit and MaxEntriesLimit bound the limits a task or the
	// config may set.
	MaxTokensLimit  = 1_000_000
	MaxEntriesLimit = 1000
	// MaxSubjectBytes bounds a memory's subject.
	MaxSubjectBytes = 200
	// MaxRecallCandidates bounds the ranked matches recall reads to fill
	// its token budget.
	MaxRecallCandidates = 200
)

// Limit bounds what recall returns to a task: at most MaxEntries memories
// whose estimated tokens add up to at most MaxTokens.
type Limit struct {
	MaxTokens  int
	MaxEntries int
}

// Limits are the recall limits of tasks by where they came from: a person
// (user), an agent (subtasks and tasks agents start), a schedule, an
// event, or a heartbeat scout. A task may set its own.
type Limits struct {
	User      Limit
	Agent     Limit
	Schedule  Limit
	Event     Limit
	Heartbeat Limit
}

// DefaultLimits returns the defaults: what a person asked for recalls
// most, a heartbeat, which runs often and cheaply, least.
func DefaultLimits() Limits {
	return Limits{
		User:      Limit{MaxTokens: 4000, MaxEntries: 25},
		Agent:     Limit{MaxTokens: 3000, MaxEntries: 20},
		Schedule:  Limit{MaxTokens: 2000, MaxEntries: 15},
		Event:     Limit{MaxTokens: 1500, MaxEntries: 10},
		Heartbeat: Limit{MaxTokens: 500, MaxEntries: 5},
	}
}

// For returns the limit of a memory source (store.MemorySources).
func (l *Limits) For(source string) Limit {
	switch source {
	case store.SourceAgent:
		return l.Agent
	case store.SourceSchedule:
		return l.Schedule
	case store.SourceEvent:
		return l.Event
	case store.SourceHeartbeat:
		return l.Heartbeat
	}
	return l.User
}

// Validate refuses limits out of range.
func (l *Limits) Validate() error {
	for _, s := range store.MemorySources {
		if lim := l.For(s); lim.MaxTokens < 0 || lim.MaxEntries < 0 ||
			lim.MaxTokens > MaxTokensLimit || lim.MaxEntries > MaxEntriesLimit {
			return fmt.Errorf("memory limits of %s: tokens must be 0–%d and entries 0–%d", s, MaxTokensLimit, MaxEntriesLimit)
		}
	}
	return nil
}

// Source is where a task came from, as its memories record it: a subtask
// counts as an agent's, and schedule:<id> and event:<id> lose their ids.
func Source(t *store.Task) string {
	if t.ParentID != "" {
		return store.SourceAgent
	}
	var src string
	if t.Options != nil {
		src = t.Options.Source
	}
	kind, _, _ := strings.Cut(src, ":")
	if store.ValidMemorySource(kind) {
		return kind
	}
	return store.SourceUser
}

// RecallLimit is the limit of t's recall: its own settings, else its
// source's in l.
func (l *Limits) RecallLimit(t *store.Task) Limit {
	lim := l.For(Source(t))
	if o := t.Options; o != nil {
		if o.MaxMemoryTokens > 0 {
			lim.MaxTokens = o.MaxMemoryTokens
		}
		if o.MaxMemoryEntries > 0 {
			lim.MaxEntries = o.MaxMemoryEntries
		}
	}
	return lim
}
