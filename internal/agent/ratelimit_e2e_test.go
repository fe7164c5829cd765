package agent

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
	"github.com/errandhq/errand/store"
)

// Tasks sharing a provider limited to 2 requests a minute all complete in
// their first attempt: each 429 is waited out by the clock, and the
// provider never answers more than its rate.
func TestLLMTasksShareARateLimitedProvider(t *testing.T) {
	t.Parallel()
	const tasks = 6
	b := setup(t)
	script := make([]providertest.Reply, tasks)
	for i := range script {
		script[i] = finishReply
	}
	server := providertest.NewOpenAIServer(t, script...)
	server.LimitRate(2, time.Minute, b.clock.Now)
	model := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: server.URL(), HTTPClient: server.Client()})
	agent, err := NewLLM(LLMConfig{Provider: model, Model: "gpt-4o-mini"})
	require.NoError(t, err)
	b.start(t, agent)
	var ids []string
	for range tasks {
		ids = append(ids, submit(t, b, &engine.SubmitParams{Goal: "spell abc", MaxAttempts: 1}).ID)
	}

	for round := 0; ; round++ {
		require.Less(t, round, 50, "the tasks do not finish")
		next, done := b.settled(t, ids)
		if done {
			break
		}
		b.clock.Advance(next.Sub(b.clock.Now()) + engine.DefaultPollInterval)
	}
	for _, id := range ids {
		got, err := b.engine.Get(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, store.StatusCompleted, got.Status)
		require.Equal(t, 1, got.Attempt)
	}
	require.Positive(t, server.Refused(), "the limit was met")
	require.LessOrEqual(t, server.PeakRate(), 2)
}

// settled waits until no task of ids runs or is due, and returns the
// earliest run_at of those still waiting, or done when all completed.
func (b *bundle) settled(t *testing.T, ids []string) (next time.Time, done bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sub, err := b.engine.Subscribe(ctx, engine.EventFilter{}, 0)
	require.NoError(t, err)
	defer sub.Close()
	for {
		next, done = time.Time{}, true
		stable := true
		for _, id := range ids {
			got, err := b.engine.Get(ctx, id)
			require.NoError(t, err)
			switch {
			case got.Status == store.StatusCompleted:
			case got.Status == store.StatusPending && got.RunAt.After(b.clock.Now()):
				done = false
				if next.IsZero() || got.RunAt.Before(next) {
					next = got.RunAt
				}
			default:
				require.NotEqual(t, store.StatusFailed, got.Status, "task %s: %+v", id, got.Error)
				stable = false
			}
		}
		if stable {
			return next, done
		}
		_, open := <-sub.Events()
		require.True(t, open, "the tasks did not settle: %v", sub.Err())
	}
}
