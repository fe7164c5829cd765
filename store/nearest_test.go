package store

import (
	"cmp"
	"fmt"
	"maps"
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

func TestFindNearest(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	vectors := map[string][]float32{"mem_a": {1, 0}, "mem_b": {0, 1}, "mem_c": {0.6, 0.8}, "mem_short": {1}}
	tests := []struct {
		name  string
		query []float32
		limit int
		want  []string // ids read, best first
		reads bool
	}{
		{name: "no vector reads nothing", limit: 2},
		{name: "the best within the limit", query: []float32{1, 0}, limit: 2, want: []string{"mem_a", "mem_c"}, reads: true},
		{name: "a vector of another length is left out", query: []float32{1}, limit: 5, want: []string{"mem_short"}, reads: true},
		{name: "nothing comparable reads nothing", query: []float32{1, 0, 0}, limit: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var read []string
			got, err := FindNearest(&MemoryNearestParams{Vector: tc.query, Limit: tc.limit},
				func(offer func(string, time.Time, []byte)) error {
					for _, id := range slices.Sorted(maps.Keys(vectors)) {
						offer(id, at, EncodeVector(vectors[id]))
					}
					return nil
				},
				func(ids []string) ([]*Memory, error) {
					read = ids
					ms := make([]*Memory, len(ids))
					for i, id := range ids {
						ms[i] = &Memory{ID: id}
					}
					return ms, nil
				})
			require.NoError(t, err)
			require.Equal(t, tc.want, read)
			require.Equal(t, tc.reads, read != nil)
			for i, m := range got {
				require.Equal(t, tc.want[i], m.Memory.ID)
			}
			require.Len(t, got, len(tc.want))
		})
	}
	t.Run("a failed scan", func(t *testing.T) {
		t.Parallel()
		errScan := fmt.Errorf("scan failed")
		_, err := FindNearest(&MemoryNearestParams{Vector: []float32{1}}, func(func(string, time.Time, []byte)) error { return errScan },
			func([]string) ([]*Memory, error) { t.Fatal("read after a failed scan"); return nil, nil })
		require.ErrorIs(t, err, errScan)
	})
}
