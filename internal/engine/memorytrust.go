package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/errandhq/errand/internal/memory"
	"github.com/errandhq/errand/store"
)

type (
	// MemoryTrust sets how far memories are trusted (see memory.Trust).
	MemoryTrust = memory.Trust
	// Embedder turns texts into vectors, one per text, in order.
	Embedder = memory.Embedder
)

// Defaults of MemoryTrust.
const (
	DefaultMinConfidence  = memory.DefaultMinConfidence
	DefaultHalfLife       = memory.DefaultHalfLife
	MaxMemorySubjectBytes = memory.MaxSubjectBytes
)

// DefaultHalfLives are the half-lives of the categories errand knows.
func DefaultHalfLives() map[string]time.Duration { return memory.DefaultHalfLives() }

// withConfidence fills in each memory's confidence now.
func (e *Engine) withConfidence(ms ...*store.Memory) {
	e.cfg.MemoryTrust.WithConfidence(e.clock.Now(), ms...)
}

// quarantine is the flag a memory's text earns from the rules, or nil.
func (e *Engine) quarantine(text string, tags []string, subject string) *store.MemoryFlag {
	return memory.Quarantine(text, tags, subject, e.clock.Now())
}

// embed returns text's vector, unit length, or nil without an embeddings
// model or when the model fails: a memory without a vector is still
// found by its words, so a failure costs recall quality, not the write.
func (e *Engine) embed(ctx context.Context, text string) []float32 {
	emb := e.cfg.MemoryTrust.Embedder
	if emb == nil {
		return nil
	}
	vs, err := emb.Embed(ctx, []string{text})
	if err != nil || len(vs) != 1 || len(vs[0]) == 0 || len(vs[0]) > store.MaxEmbeddingDims {
		e.logger.WarnContext(ctx, "memory embeddings: no vector", slog.Any("error", err))
		return nil
	}
	return memory.Normalize(vs[0])
}
