package store

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// NearestTop keeps exactly what a full sort would put first: most similar,
// then newest, then the higher id.
func TestNearestTopMatchesAFullSort(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	var all []NearestCandidate
	for i := range 60 {
		all = append(all, NearestCandidate{
			ID:         fmt.Sprintf("mem_%02d", i),
			CreatedAt:  at.Add(time.Duration(i%7) * time.Minute),
			Similarity: float64(i%5) / 4,
		})
	}
	sorted := slices.Clone(all)
	slices.SortFunc(sorted, func(a, b NearestCandidate) int {
		return cmp.Or(cmp.Compare(b.Similarity, a.Similarity), b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.ID, a.ID))
	})
	for _, limit := range []int{0, 1, 3, 10, 60, 100} {
		top := NewNearestTop(limit)
		for _, c := range all {
			top.Offer(c)
		}
		want := sorted[:min(max(limit, 1), len(sorted))]
		require.Equal(t, want, top.Best(), "limit %d", limit)
	}
}

func TestPairNearestLeavesOutWhatWentAndKeepsTheOrder(t *testing.T) {
	t.Parallel()
	best := []NearestCandidate{{ID: "mem_b", Similarity: 0.9}, {ID: "mem_gone", Similarity: 0.8}, {ID: "mem_a", Similarity: 0.7}}
	a, b := &Memory{ID: "mem_a"}, &Memory{ID: "mem_b"}
	require.Equal(t, []*MemoryNearest{{Memory: b, Similarity: 0.9}, {Memory: a, Similarity: 0.7}}, PairNearest(best, []*Memory{a, b}))
}
