package dashboard

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/clock"
)

// The health page shows each agent and concurrency key with its tasks,
// limit and pause, and each agent's button pauses or resumes it, behind
// the session's CSRF token.
func TestHealthPausesAndResumesAgents(t *testing.T) {
	t.Parallel()
	client, err := errand.Open(t.Context(), "sqlite://"+filepath.Join(t.TempDir(), "errand.db"), &errand.Config{
		Concurrency: map[string]int{"agent:writer": 3, "repo:web": 1},
		// A client that runs agents knows which names are agents.
		Agents: map[string]errand.Agent{"writer": errand.AgentFunc(nil)},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	d, err := New(Config{Client: client, Token: testToken, Clock: clock.NewFake(time.Now()), Home: t.TempDir()})
	require.NoError(t, err)
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	h := &harness{client: client, srv: srv}
	b := h.browser(t)
	h.login(t, b)

	for range 2 {
		_, err := client.Submit(t.Context(), &errand.SubmitParams{Goal: "g", Agent: "writer", ConcurrencyKey: "repo:web"})
		require.NoError(t, err)
	}
	row := func(page, name string) string {
		t.Helper()
		i := strings.Index(page, `<a href="/?agent=`+name+`">`)
		require.NotEqual(t, -1, i, "a row for %s", name)
		end := strings.Index(page[i:], "</tr>")
		return page[i : i+end]
	}
	cells := func(s string) string { // the row's text, cells separated by |
		s = strings.NewReplacer("</td>", "|", "\n", "").Replace(s)
		var out strings.Builder
		in := false
		for _, r := range s {
			switch {
			case r == '<':
				in = true
			case r == '>':
				in = false
			case !in:
				out.WriteRune(r)
			}
		}
		return strings.Join(strings.Fields(out.String()), " ")
	}

	resp, page := get(t, b, srv.URL+"/health")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, "Waiting on rate limit")
	writer := row(page, "writer")
	require.Equal(t, "writer| go| –| 0| 2| 0| 3| no| Pause |", cells(writer))
	require.Contains(t, writer, `action="/agents/writer/pause"`)
	require.Contains(t, page, "<td><code>repo:web</code></td><td>0</td><td>2</td><td>1</td>")
	token := csrfOf(t, page)

	resp, _ = post(t, b, srv.URL+"/agents/writer/pause", url.Values{})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "no CSRF token")
	resp, _ = post(t, b, srv.URL+"/agents/writer/pause", url.Values{"csrf": {token}}, "Sec-Fetch-Site", "cross-site")
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	a, err := client.Agent(t.Context(), "writer")
	require.NoError(t, err)
	require.False(t, a.Paused, "refused requests change nothing")

	resp, _ = post(t, b, srv.URL+"/agents/writer/pause", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/health#agents", resp.Header.Get("Location"))
	a, err = client.Agent(t.Context(), "writer")
	require.NoError(t, err)
	require.True(t, a.Paused)
	_, page = get(t, b, srv.URL+"/health")
	writer = row(page, "writer")
	require.Contains(t, cells(writer), "| 3| paused 0s ago| Resume |")
	require.Contains(t, writer, `action="/agents/writer/resume"`)

	resp, _ = post(t, b, srv.URL+"/agents/writer/resume", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	a, err = client.Agent(t.Context(), "writer")
	require.NoError(t, err)
	require.False(t, a.Paused)

	resp, page = post(t, b, srv.URL+"/agents/nobody/pause", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Contains(t, page, "nobody")
	resp, _ = post(t, b, srv.URL+"/agents/writer/explode", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}
