package taskrun

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRateLimitedError(t *testing.T) {
	t.Parallel()
	cause := errors.New("openai: HTTP 429: slow down")
	err := fmt.Errorf("step 3: %w", &RateLimited{Wait: 2 * time.Second, StatusCode: 429, Reason: "slow down", Err: cause})
	var rl *RateLimited
	require.ErrorAs(t, err, &rl)
	require.ErrorIs(t, err, cause)
	require.Equal(t, "step 3: the provider is rate limiting (HTTP 429), retry after 2s: slow down", err.Error())
	require.Equal(t, "the provider is rate limiting", (&RateLimited{}).Error())
}
