package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/errandhq/errand/internal/id"
	"github.com/errandhq/errand/internal/memory"
	"github.com/errandhq/errand/internal/pgtest"
	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/pgstore"
	"github.com/errandhq/errand/store/sqlitestore"
)

// benchDims is the vector length of the recall benchmarks: that of
// nomic-embed-text, a common local embeddings model.
const benchDims = 768

// randomEmbedder gives every text a random unit vector: what recall costs
// does not depend on what the vectors mean.
type randomEmbedder struct{ rng *rand.Rand }

func (r randomEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i := range texts {
		out[i] = memory.Normalize(randomVector(r.rng))
	}
	return out, nil
}

func randomVector(rng *rand.Rand) []float32 {
	v := make([]float32, benchDims)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// seedMemories writes n memories with vectors, one transaction each as
// remember writes them. Their words are drawn from a vocabulary of 5,000
// with a Zipf distribution, as words of real text are.
func seedMemories(b *testing.B, st store.Store, n int) {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rng, 1.1, 1, 4999)
	word := func() string { return fmt.Sprintf("w%04d", zipf.Uint64()) }
	ctx := context.Background()
	for i := range n {
		text := fmt.Sprintf("note %d: the %s of the %s needs a %s before the %s and %s", i, word(), word(), word(), word(), word())
		if _, err := st.MemoryInsert(ctx, &store.MemoryInsertParams{
			ID: id.New(id.Memory), Text: text, Source: store.SourceUser, Category: store.CategoryFact,
			Embedding: memory.Normalize(randomVector(rng)), Actor: store.ActorUser,
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecall is one recall of a person's task (25 entries, 4,000
// tokens) over a store of n memories: full text only, and hybrid (full
// text fused with an exact scan of 768-number vectors).
//
//	go test -run XXX -bench BenchmarkRecall -benchtime 20x ./internal/engine
func BenchmarkRecall(b *testing.B) {
	stores := map[string]func(b *testing.B) store.Store{
		"sqlite": func(b *testing.B) store.Store {
			st, err := sqlitestore.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			return st
		},
		"postgres": func(b *testing.B) store.Store {
			st, err := pgstore.Open(context.Background(), pgtest.DSN(b), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close() })
			return st
		},
	}
	for _, driver := range []string{"sqlite", "postgres"} {
		for _, n := range benchSizes() {
			b.Run(fmt.Sprintf("%s/memories=%d", driver, n), func(b *testing.B) {
				st := stores[driver](b)
				seedMemories(b, st, n)
				for _, mode := range []string{"fulltext", "hybrid"} {
					b.Run(mode, func(b *testing.B) {
						e, err := New(st, nil)
						if err != nil {
							b.Fatal(err)
						}
						if mode == "hybrid" {
							e.cfg.MemoryTrust.Embedder = randomEmbedder{rng: rand.New(rand.NewPCG(3, 4))}
						}
						ctx := context.Background()
						for b.Loop() {
							res, err := e.Memories().Recall(ctx, &memory.RecallParams{Query: "what is the w0040 of the w0100 and w0007"})
							if err != nil {
								b.Fatal(err)
							}
							if len(res.Memories) == 0 {
								b.Fatal("recalled nothing")
							}
						}
					})
				}
			})
		}
	}
}

// benchSizes are the store sizes of BenchmarkRecall; ERRAND_BENCH_MEMORIES
// (a number) measures one size only.
func benchSizes() []int {
	if n, err := strconv.Atoi(os.Getenv("ERRAND_BENCH_MEMORIES")); err == nil && n > 0 {
		return []int{n}
	}
	return []int{10_000, 100_000}
}
