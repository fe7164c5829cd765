package providertest_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/provider"
	"github.com/errandhq/errand/internal/providertest"
)

// completion is the outcome of a Complete call run in the background.
type completion struct {
	resp *provider.Response
	err  error
}

// completeStreamed starts a streamed call whose pieces arrive on the
// returned channel, and returns the channel of its outcome.
func completeStreamed(ctx context.Context, srv *providertest.Server) (<-chan string, <-chan completion) {
	pieces := make(chan string, 64)
	done := make(chan completion, 1)
	client := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: srv.URL(), HTTPClient: srv.Client()})
	go func() {
		resp, err := client.Complete(ctx, &provider.Request{
			Model: "m", Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi"}},
			OnText: func(s string) { pieces <- s },
		})
		done <- completion{resp, err}
	}()
	return pieces, done
}

func waitCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// receive takes n pieces off the channel.
func receive(t *testing.T, pieces <-chan string, n int) []string {
	t.Helper()
	ctx := waitCtx(t)
	var got []string
	for len(got) < n {
		select {
		case p := <-pieces:
			got = append(got, p)
		case <-ctx.Done():
			t.Fatalf("received %q, want %d pieces", got, n)
		}
	}
	return got
}

func TestHoldStreamedReply(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	reply := providertest.Reply{
		Text:      "Hello, streaming world",
		ToolCalls: []provider.ToolCall{{ID: "call_1", Name: "look"}},
		Usage:     &provider.Usage{InputTokens: 3, OutputTokens: 4},
		Hold:      release, HoldAfter: 2,
	}
	srv := providertest.NewOpenAIServer(t, reply)
	pieces, done := completeStreamed(t.Context(), srv)

	require.NoError(t, srv.WaitHeld(waitCtx(t), 1))
	require.Equal(t, 1, srv.Held())
	all := providertest.SplitText(reply.Text)
	require.Equal(t, all[:2], receive(t, pieces, 2), "the pieces before the hold reached the client")
	select {
	case c := <-done:
		t.Fatalf("the call ended while its reply was held: %+v", c)
	default:
	}

	close(release)
	c := <-done
	require.NoError(t, c.err)
	require.Equal(t, reply.Text, c.resp.Content)
	require.Len(t, c.resp.ToolCalls, 1)
	require.Equal(t, provider.Usage{InputTokens: 3, OutputTokens: 4}, c.resp.Usage)
	require.Equal(t, all[2:], receive(t, pieces, len(all)-2))
	require.Equal(t, 1, srv.Held(), "a reply is held once")
}

// HoldAfter past the end of the text holds after all of it, before the
// tool calls; a reply without text holds before anything but the role.
func TestHoldAfterAllText(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := providertest.NewOpenAIServer(t,
		providertest.Reply{Text: "short", Hold: release, HoldAfter: 100},
		providertest.Reply{ToolCalls: []provider.ToolCall{{ID: "c", Name: "f"}}, Hold: release},
	)
	pieces, done := completeStreamed(t.Context(), srv)
	require.NoError(t, srv.WaitHeld(waitCtx(t), 1))
	require.Equal(t, providertest.SplitText("short"), receive(t, pieces, 2))
	close(release) // lets this reply and the next go
	c := <-done
	require.NoError(t, c.err)
	require.Equal(t, "short", c.resp.Content)

	_, done = completeStreamed(t.Context(), srv)
	c = <-done
	require.NoError(t, c.err)
	require.Equal(t, "f", c.resp.ToolCalls[0].Name)
	require.Equal(t, 2, srv.Held())
}

func TestHoldPlainReply(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := providertest.NewOpenAIServer(t, providertest.Reply{Text: "whole", Hold: release})
	done := make(chan string, 1)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"/chat/completions", strings.NewReader(simpleRequest))
	require.NoError(t, err)
	go func() {
		// No require here: only the test's goroutine may stop the test.
		resp, err := srv.Client().Do(req)
		if err != nil {
			done <- err.Error()
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			done <- err.Error()
			return
		}
		done <- string(body)
	}()
	require.NoError(t, srv.WaitHeld(waitCtx(t), 1))
	select {
	case body := <-done:
		t.Fatalf("answered while held: %s", body)
	default:
	}
	close(release)
	require.Contains(t, <-done, `"content":"whole"`)
}

// A client that goes away while its reply is held gets nothing more, and
// the handler returns (goleak checks it at the end).
func TestHoldClientGone(t *testing.T) {
	t.Parallel()
	srv := providertest.NewOpenAIServer(t, providertest.Reply{Text: "never finished", HoldAfter: 1, Hold: make(chan struct{})})
	ctx, cancel := context.WithCancel(t.Context())
	pieces, done := completeStreamed(ctx, srv)
	require.NoError(t, srv.WaitHeld(waitCtx(t), 1))
	require.Equal(t, []string{"neve"}, receive(t, pieces, 1))
	cancel()
	c := <-done
	require.ErrorIs(t, c.err, context.Canceled)
}

func TestWaitHeldEndedContext(t *testing.T) {
	t.Parallel()
	srv := providertest.NewOpenAIServer(t)
	require.NoError(t, srv.WaitHeld(t.Context(), 0))
	ended, end := context.WithCancel(t.Context())
	end()
	err := srv.WaitHeld(ended, 1)
	require.ErrorIs(t, err, context.Canceled)
	require.EqualError(t, err, "wait for 1 held replies, have 0: context canceled")
}

// A streamed reply without a Hold is sent as before: no hold counted.
func TestNoHold(t *testing.T) {
	t.Parallel()
	srv := providertest.NewOpenAIServer(t, providertest.Reply{Text: "free flowing text", HoldAfter: 1})
	pieces, done := completeStreamed(t.Context(), srv)
	c := <-done
	require.NoError(t, c.err)
	require.Equal(t, "free flowing text", strings.Join(receive(t, pieces, len(providertest.SplitText(c.resp.Content))), ""))
	require.Zero(t, srv.Held())
}
