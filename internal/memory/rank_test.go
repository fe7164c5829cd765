package memory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

var rankNow = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func mem(id, text, subject string, age time.Duration) *store.Memory {
	return &store.Memory{ID: id, Text: text, Subject: subject, Category: store.CategoryFact, CreatedAt: rankNow.Add(-age)}
}

func ids(rs []Ranked) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Memory.ID
	}
	return out
}

func TestFuse(t *testing.T) {
	t.Parallel()
	floor := 0.5
	for _, tc := range []struct {
		name  string
		trust Trust
		lists [][]*store.Memory
		want  []string
	}{
		{"one list keeps its order", Trust{}, [][]*store.Memory{{mem("m1", "a", "", 0), mem("m2", "b", "", 0)}}, []string{"m1", "m2"}},
		{"in both lists ranks first", Trust{}, [][]*store.Memory{
			{mem("m1", "a", "", 0), mem("m2", "b", "", 0)},
			{mem("m2", "b", "", 0), mem("m3", "c", "", 0)},
		}, []string{"m2", "m1", "m3"}},
		{"a tie goes to the newest id", Trust{}, [][]*store.Memory{{mem("m1", "a", "", 0)}, {mem("m2", "b", "", 0)}}, []string{"m2", "m1"}},
		{"decayed below the floor goes", Trust{MinConfidence: &floor, HalfLives: map[string]time.Duration{store.CategoryFact: time.Hour}},
			[][]*store.Memory{{mem("m1", "old", "", 3*time.Hour), mem("m2", "new", "", 0)}}, []string{"m2"}},
		{"confidence weighs the rank", Trust{HalfLives: map[string]time.Duration{store.CategoryFact: time.Hour}},
			[][]*store.Memory{{mem("m1", "old", "", 2*time.Hour), mem("m2", "new", "", 0)}}, []string{"m2", "m1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, ids(tc.trust.Fuse(rankNow, tc.lists...)))
		})
	}
}

func TestCollapse(t *testing.T) {
	t.Parallel()
	rank := func(ms ...*store.Memory) []Ranked {
		out := make([]Ranked, len(ms))
		for i, m := range ms {
			out[i] = Ranked{Memory: m, Score: float64(len(ms) - i)}
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		in         []Ranked
		want       []string
		supersedes map[string][]string
		conflicts  [][2]string // newer, older
	}{
		{"distinct kept", rank(mem("m1", "a", "", 0), mem("m2", "b", "", 0)), []string{"m1", "m2"}, map[string][]string{}, nil},
		{"same text, no subject: the newest in the best place",
			rank(mem("m1", "Port  is 80", "", time.Hour), mem("m2", "port is 80", "", 0)), []string{"m2"}, map[string][]string{}, nil},
		{"one subject: the last asserted supersedes the rest",
			rank(mem("m1", "port is 80", "port", time.Hour), mem("m2", "port is 8080", "Port ", 0), mem("m3", "port is 80", "port", 2*time.Hour)),
			[]string{"m2"}, map[string][]string{"m2": {"m1", "m3"}}, [][2]string{{"m2", "m1"}, {"m2", "m3"}}},
		{"one subject, same text: no conflict",
			rank(mem("m1", "port is 80", "port", time.Hour), mem("m2", "Port is 80", "port", 0)),
			[]string{"m2"}, map[string][]string{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, supersedes, conflicts := Collapse(tc.in)
			require.Equal(t, tc.want, ids(out))
			require.Equal(t, tc.in[0].Score, out[0].Score, "the kept memory takes its group's best score")
			for k, v := range supersedes {
				if len(v) == 0 {
					delete(supersedes, k)
				}
			}
			require.Equal(t, tc.supersedes, supersedes)
			var got [][2]string
			for _, c := range conflicts {
				got = append(got, [2]string{c.Newer.ID, c.Older.ID})
			}
			require.Equal(t, tc.conflicts, got)
		})
	}
}
