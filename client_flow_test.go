package errand_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
)

func TestOpenRefusesImpossibleFlowLimits(t *testing.T) {
	t.Parallel()
	for _, cfg := range []*errand.Config{
		{Concurrency: map[string]int{"repo:web": -1}},
		{Concurrency: map[string]int{"": 2}},
		{RateLimits: map[string]errand.RateLimit{"gpt": {RequestsPerMinute: -5}}},
		{RateLimits: map[string]errand.RateLimit{"": {RequestsPerMinute: 5}}},
	} {
		path := filepath.Join(t.TempDir(), "errand.db")
		_, err := errand.Open(t.Context(), path, cfg)
		require.Error(t, err)
		require.NoFileExists(t, path, "nothing is written")
	}
}
