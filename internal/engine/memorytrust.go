package engine

import (
	"cmp"
	"context"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/errandhq/errand/internal/injection"
	"github.com/errandhq/errand/store"
)

// MemoryTrust sets how far memories are trusted: how fast confidence in
// each category decays, the floor below which recall skips a memory, and
// the embeddings model of hybrid recall.
type MemoryTrust struct {
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
	// memoryreview.go).
	ClassifierAgent string
}

// Embedder turns texts into vectors, one per text, in order.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Defaults of MemoryTrust.
const (
	DefaultMinConfidence = 0.1
	DefaultHalfLife      = 720 * time.Hour
	// rrfK damps the weight of the top ranks in reciprocal rank fusion
	// (the constant of Cormack et al.).
	rrfK = 60
	// MaxMemorySubjectBytes bounds a memory's subject.
	MaxMemorySubjectBytes = 200
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

// halfLife is the half-life of a category.
func (t *MemoryTrust) halfLife(category string) time.Duration {
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

func (t *MemoryTrust) minConfidence() float64 {
	if t.MinConfidence != nil {
		return *t.MinConfidence
	}
	return DefaultMinConfidence
}

// withConfidence fills in each memory's confidence at now.
func (e *Engine) withConfidence(ms ...*store.Memory) {
	now := e.clock.Now()
	for _, m := range ms {
		if m != nil {
			m.Confidence = m.DecayedAt(now, e.cfg.MemoryTrust.halfLife(m.Category))
		}
	}
}

// checkCategory validates a memory category: lower-case letters, digits
// and '_', starting with a letter, at most 64.
func checkCategory(c string) error {
	if c == "" {
		return nil
	}
	if len(c) > 64 || c[0] < 'a' || c[0] > 'z' || strings.ContainsFunc(c, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_')
	}) {
		return invalid("category", "%q is not a category name: use lower-case letters, digits and '_', starting with a letter (at most 64)", c)
	}
	return nil
}

// checkSubject validates a memory subject.
func checkSubject(s string) error {
	if len(s) > MaxMemorySubjectBytes {
		return invalid("subject", "is %d bytes; the limit is %d", len(s), MaxMemorySubjectBytes)
	}
	if err := checkText("subject", s); err != nil {
		return err
	}
	if strings.ContainsFunc(s, unicode.IsControl) {
		return invalid("subject", "must not hold control characters")
	}
	return nil
}

// quarantine is the flag a memory's text earns from the rules, or nil.
func (e *Engine) quarantine(text string, tags []string, subject string) *store.MemoryFlag {
	v := injection.Classify(strings.Join(append([]string{text, subject}, tags...), "\n"))
	if !v.Flagged {
		return nil
	}
	return &store.MemoryFlag{Reason: v.Reason, By: store.MemoryFlaggedByRules, At: e.clock.Now().UTC()}
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
	return normalize(vs[0])
}

// normalize scales v to unit length; a zero vector is nil.
func normalize(v []float32) []float32 {
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

// ranked is a recall candidate with its fused score.
type ranked struct {
	m     *store.Memory
	score float64
}

// fuse merges ranked lists by reciprocal rank fusion: a memory scores
// Σ 1/(rrfK + rank) over the lists it appears in. The score is then
// weighed by the memory's confidence, and memories below the floor go.
func (e *Engine) fuse(lists ...[]*store.Memory) []ranked {
	byID := map[string]*ranked{}
	var order []*ranked
	for _, list := range lists {
		for rank, m := range list {
			r := byID[m.ID]
			if r == nil {
				r = &ranked{m: m}
				byID[m.ID] = r
				order = append(order, r)
			}
			r.score += 1 / float64(rrfK+rank+1)
		}
	}
	floor := e.cfg.MemoryTrust.minConfidence()
	out := make([]ranked, 0, len(order))
	for _, r := range order {
		e.withConfidence(r.m)
		if r.m.Confidence < floor {
			continue
		}
		r.score *= r.m.Confidence
		out = append(out, *r)
	}
	slices.SortStableFunc(out, func(a, b ranked) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return strings.Compare(b.m.ID, a.m.ID) // newest first
	})
	return out
}

// asserted is when a memory was last said to be true.
func asserted(m *store.Memory) time.Time {
	if m.RefreshedAt != nil && m.RefreshedAt.After(m.CreatedAt) {
		return *m.RefreshedAt
	}
	return m.CreatedAt
}

// normalText is a memory's text as duplicates compare: case folded and
// white space collapsed.
func normalText(s string) string {
	return strings.Join(strings.Fields(strings.ToLower(s)), " ")
}

// conflict is two memories with one subject that disagree.
type conflict struct{ newer, older *store.Memory }

// collapse keeps, of memories with one subject, the one last asserted,
// noting those it supersedes: the others whose text differs, each a
// conflict; of memories without a subject and with the same normalised
// text, the newest. Each kept memory takes the best score of its group.
func collapse(in []ranked) (out []ranked, supersedes map[string][]string, conflicts []conflict) {
	type group struct {
		at      int // index in out
		members []*store.Memory
	}
	groups := map[string]*group{}
	for _, r := range in {
		key := "t:" + normalText(r.m.Text)
		if r.m.Subject != "" {
			key = "s:" + strings.ToLower(strings.TrimSpace(r.m.Subject))
		}
		g := groups[key]
		if g == nil {
			groups[key] = &group{at: len(out), members: []*store.Memory{r.m}}
			out = append(out, r)
			continue
		}
		g.members = append(g.members, r.m)
		if kept := out[g.at].m; asserted(r.m).After(asserted(kept)) || asserted(r.m).Equal(asserted(kept)) && r.m.ID > kept.ID {
			out[g.at].m = r.m // the group keeps its best score
		}
	}
	supersedes = map[string][]string{}
	for _, g := range groups {
		kept := out[g.at].m
		for _, m := range g.members {
			if m == kept {
				continue
			}
			if kept.Subject != "" && normalText(m.Text) != normalText(kept.Text) {
				supersedes[kept.ID] = append(supersedes[kept.ID], m.ID)
				conflicts = append(conflicts, conflict{newer: kept, older: m})
			}
		}
		slices.Sort(supersedes[kept.ID])
	}
	slices.SortFunc(conflicts, func(a, b conflict) int {
		return cmp.Or(strings.Compare(a.newer.ID, b.newer.ID), strings.Compare(a.older.ID, b.older.ID))
	})
	return out, supersedes, conflicts
}
