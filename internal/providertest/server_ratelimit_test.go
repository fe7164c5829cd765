package providertest_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
)

// A scripted 429 carries its Retry-After; the request after it is
// answered as usual.
func TestRateLimitedReply(t *testing.T) {
	t.Parallel()
	srv := providertest.NewOpenAIServer(t,
		providertest.Reply{Status: http.StatusTooManyRequests, RetryAfter: "2"},
		providertest.Reply{Status: http.StatusServiceUnavailable},
		providertest.Reply{Text: "hello"},
	)
	client := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: srv.URL(), HTTPClient: srv.Client()})
	req := &provider.Request{Model: "m", Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}}

	_, err := client.Complete(t.Context(), req)
	pe, ok := provider.RateLimit(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, http.StatusTooManyRequests, pe.StatusCode)
	require.Equal(t, 2*time.Second, pe.RetryAfter)

	_, err = client.Complete(t.Context(), req)
	pe, ok = provider.RateLimit(err)
	require.True(t, ok, "%v", err)
	require.Zero(t, pe.RetryAfter, "no Retry-After sent")

	resp, err := client.Complete(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, "hello", resp.Content)
	require.Equal(t, 3, srv.Requests())
}
