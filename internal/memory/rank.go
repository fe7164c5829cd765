package memory

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/errandhq/errand/store"
)

// rrfK damps the weight of the top ranks in reciprocal rank fusion (the
// constant of Cormack et al.).
const rrfK = 60

// Ranked is a recall candidate with its fused score.
type Ranked struct {
	Memory *store.Memory
	Score  float64
}

// Fuse merges ranked lists by reciprocal rank fusion: a memory scores
// Σ 1/(rrfK + rank) over the lists it appears in. The score is then
// weighed by the memory's confidence at now, and memories below the
// trust's floor go.
func (t *Trust) Fuse(now time.Time, lists ...[]*store.Memory) []Ranked {
	byID := map[string]*Ranked{}
	var order []*Ranked
	for _, list := range lists {
		for rank, m := range list {
			r := byID[m.ID]
			if r == nil {
				r = &Ranked{Memory: m}
				byID[m.ID] = r
				order = append(order, r)
			}
			r.Score += 1 / float64(rrfK+rank+1)
		}
	}
	floor := t.Floor()
	out := make([]Ranked, 0, len(order))
	for _, r := range order {
		t.WithConfidence(now, r.Memory)
		if r.Memory.Confidence < floor {
			continue
		}
		r.Score *= r.Memory.Confidence
		out = append(out, *r)
	}
	slices.SortStableFunc(out, func(a, b Ranked) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return strings.Compare(b.Memory.ID, a.Memory.ID) // newest first
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

// Conflict is two memories with one subject that disagree.
type Conflict struct{ Newer, Older *store.Memory }

// Collapse keeps, of memories with one subject, the one last asserted,
// noting those it supersedes: the others whose text differs, each a
// conflict; of memories without a subject and with the same normalised
// text, the newest. Each kept memory takes the best score of its group.
func Collapse(in []Ranked) (out []Ranked, supersedes map[string][]string, conflicts []Conflict) {
	type group struct {
		at      int // index in out
		members []*store.Memory
	}
	groups := map[string]*group{}
	for _, r := range in {
		key := "t:" + normalText(r.Memory.Text)
		if r.Memory.Subject != "" {
			key = "s:" + strings.ToLower(strings.TrimSpace(r.Memory.Subject))
		}
		g := groups[key]
		if g == nil {
			groups[key] = &group{at: len(out), members: []*store.Memory{r.Memory}}
			out = append(out, r)
			continue
		}
		g.members = append(g.members, r.Memory)
		if kept := out[g.at].Memory; asserted(r.Memory).After(asserted(kept)) || asserted(r.Memory).Equal(asserted(kept)) && r.Memory.ID > kept.ID {
			out[g.at].Memory = r.Memory // the group keeps its best score
		}
	}
	supersedes = map[string][]string{}
	for _, g := range groups {
		kept := out[g.at].Memory
		for _, m := range g.members {
			if m == kept {
				continue
			}
			if kept.Subject != "" && normalText(m.Text) != normalText(kept.Text) {
				supersedes[kept.ID] = append(supersedes[kept.ID], m.ID)
				conflicts = append(conflicts, Conflict{Newer: kept, Older: m})
			}
		}
		slices.Sort(supersedes[kept.ID])
	}
	slices.SortFunc(conflicts, func(a, b Conflict) int {
		return cmp.Or(strings.Compare(a.Newer.ID, b.Newer.ID), strings.Compare(a.Older.ID, b.Older.ID))
	})
	return out, supersedes, conflicts
}
