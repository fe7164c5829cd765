package memory

import (
	"context"
	"math"
	"strings"
	"time"

	"github.com/errandhq/errand/internal/injection"
	"github.com/errandhq/errand/store"
)

// Trust sets how far memories are trusted: how fast confidence in each
// category decays, the floor below which recall skips a memory, and the
// embeddings model of hybrid recall.
type Trust struct {
	// HalfLives are by category; a category not listed takes the entry
	// "default", else DefaultHalfLives' entry, else DefaultHalfLife. A
	// half-life of 0 never decays.
	HalfLives map[string]time.Duration
	// MinConfidence is the floor below which recall skips a memory; nil
	// takes DefaultMinConfidence.
	MinConfidence *float64
	// Embedder, when set, gives memories a vector at write time, and
	// recall fuses the vector ranking with the full-text one.
	Embedder Embedder
	// ClassifierAgent, when set, names the agent (a cheap model) that
	// reads each memory the rules let through before it is written (see
	// review.go).
	ClassifierAgent string
}

// Embedder turns texts into vectors, one per text, in order.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Defaults of Trust.
const (
	DefaultMinConfidence = 0.1
	DefaultHalfLife      = 720 * time.Hour
)

// DefaultHalfLives are the half-lives of the categories errand knows.
func DefaultHalfLives() map[string]time.Duration {
	return map[string]time.Duration{
		store.CategoryFact:        2160 * time.Hour,
		store.CategoryPreference:  4320 * time.Hour,
		store.CategoryObservation: 168 * time.Hour,
		store.CategoryTaskResult:  720 * time.Hour,
	}
}

// HalfLife is the half-life of a category.
func (t *Trust) HalfLife(category string) time.Duration {
	if d, ok := t.HalfLives[category]; ok {
		return d
	}
	if d, ok := DefaultHalfLives()[category]; ok {
		return d
	}
	if d, ok := t.HalfLives["default"]; ok {
		return d
	}
	return DefaultHalfLife
}

// Floor is the confidence below which recall skips a memory.
func (t *Trust) Floor() float64 {
	if t.MinConfidence != nil {
		return *t.MinConfidence
	}
	return DefaultMinConfidence
}

// WithConfidence fills in each memory's confidence at now.
func (t *Trust) WithConfidence(now time.Time, ms ...*store.Memory) {
	for _, m := range ms {
		if m != nil {
			m.Confidence = m.DecayedAt(now, t.HalfLife(m.Category))
		}
	}
}

// Quarantine is the flag a memory's text earns from the injection rules
// at now, or nil.
func Quarantine(text string, tags []string, subject string, now time.Time) *store.MemoryFlag {
	v := injection.Classify(strings.Join(append([]string{text, subject}, tags...), "\n"))
	if !v.Flagged {
		return nil
	}
	return &store.MemoryFlag{Reason: v.Reason, By: store.MemoryFlaggedByRules, At: now.UTC()}
}

// Normalize scales v to unit length; a zero vector is nil.
func Normalize(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 || math.IsNaN(sum) || math.IsInf(sum, 0) {
		return nil
	}
	n := float32(1 / math.Sqrt(sum))
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = x * n
	}
	return out
}
