package providertest_test

import (
	"net/http"
	"sync"
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

// LimitRate lets n requests through in any window, by the clock given:
// the next is refused 429 with the seconds until one leaves the window,
// without using up a scripted reply.
func TestLimitRate(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	advance := func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(d)
	}
	srv := providertest.NewOpenAIServer(t, providertest.Reply{Text: "a"}, providertest.Reply{Text: "b"}, providertest.Reply{Text: "c"})
	srv.LimitRate(2, time.Minute, clock)
	client := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: srv.URL(), HTTPClient: srv.Client()})
	req := &provider.Request{Model: "m", Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}}}
	complete := func() (string, error) {
		resp, err := client.Complete(t.Context(), req)
		if err != nil {
			return "", err
		}
		return resp.Content, nil
	}

	got, err := complete()
	require.NoError(t, err)
	require.Equal(t, "a", got)
	advance(20 * time.Second)
	got, err = complete()
	require.NoError(t, err)
	require.Equal(t, "b", got)

	advance(500 * time.Millisecond)
	_, err = complete()
	pe, ok := provider.RateLimit(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, 40*time.Second, pe.RetryAfter, "39.5 s until the first leaves the window, rounded up")
	require.Equal(t, 1, srv.Refused())

	advance(39500 * time.Millisecond)
	got, err = complete()
	require.NoError(t, err)
	require.Equal(t, "c", got, "the refused request took no reply")
	require.Equal(t, 2, srv.PeakRate())
	require.Equal(t, 4, srv.Requests(), "refused requests are recorded too")
}
