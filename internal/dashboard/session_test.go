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

// savedCookie is the session cookie a browser holds for srv.
func savedCookie(t *testing.T, b *http.Client, srv string) *http.Cookie {
	t.Helper()
	u, err := url.Parse(srv)
	require.NoError(t, err)
	cookies := b.Jar.Cookies(u)
	require.Len(t, cookies, 1)
	return cookies[0]
}

// withCookie requests path with only cookie, as an old copy of it would
// be sent.
func withCookie(t *testing.T, srv, method, path string, cookie *http.Cookie, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv+path, strings.NewReader(""))
	require.NoError(t, err)
	req.AddCookie(cookie)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp
}

// Logging out ends the session on the server: a copy of its cookie, kept
// from before, signed and unexpired, gets the login page. Other sessions
// go on.
func TestLogoutRevokesTheSession(t *testing.T) {
	t.Parallel()
	h := setup(t)
	b, other := h.browser(t), h.browser(t)
	h.login(t, b)
	h.login(t, other)
	saved := savedCookie(t, b, h.srv.URL)
	_, page := get(t, b, h.srv.URL+"/")
	csrf := csrfOf(t, page)
	require.Equal(t, http.StatusOK, withCookie(t, h.srv.URL, http.MethodGet, "/", saved).StatusCode)

	resp, _ := post(t, b, h.srv.URL+"/logout", url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	resp = withCookie(t, h.srv.URL, http.MethodGet, "/", saved)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/login", resp.Header.Get("Location"))
	resp = withCookie(t, h.srv.URL, http.MethodGet, "/tasks/rows", saved, "HX-Request", "true")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp = withCookie(t, h.srv.URL, http.MethodPost, "/logout", saved, "X-CSRF-Token", csrf)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/login", resp.Header.Get("Location"))
	resp, _ = get(t, b, h.srv.URL+"/login")
	require.Equal(t, http.StatusOK, resp.StatusCode, "the login page shows, not a redirect")

	resp, _ = get(t, other, h.srv.URL+"/")
	require.Equal(t, http.StatusOK, resp.StatusCode, "another session goes on")
}

// newDashboard serves a dashboard over client with token and home.
func newDashboard(t *testing.T, client *errand.Client, token, home string) *httptest.Server {
	t.Helper()
	d, err := New(Config{Client: client, Token: token, Home: home, Clock: clock.NewFake(time.Now())})
	require.NoError(t, err)
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	return srv
}

// loginCookie logs in to srv and returns the cookie it sets.
func loginCookie(t *testing.T, srv, token string) *http.Cookie {
	t.Helper()
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).
		PostForm(srv+"/login", url.Values{"token": {token}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Len(t, resp.Cookies(), 1)
	return resp.Cookies()[0]
}

// Browsers send a host's cookies to every port: each daemon names its
// cookie apart (its data directory and token), so two on one host do not
// overwrite each other's login. A restart keeps the name but ends the
// sessions: the revocations of logouts live in memory only.
func TestCookieNameIsTheDaemons(t *testing.T) {
	t.Parallel()
	client, err := errand.Open(t.Context(), "sqlite://"+filepath.Join(t.TempDir(), "errand.db"), &errand.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	homeA, homeB := t.TempDir(), t.TempDir()

	a := loginCookie(t, newDashboard(t, client, testToken, homeA).URL, testToken)
	b := loginCookie(t, newDashboard(t, client, testToken, homeB).URL, testToken)
	c := loginCookie(t, newDashboard(t, client, "another-token-0123", homeA).URL, "another-token-0123")
	require.True(t, strings.HasPrefix(a.Name, sessionCookie+"_"), a.Name)
	require.NotEqual(t, a.Name, b.Name, "another data directory")
	require.NotEqual(t, a.Name, c.Name, "another token")

	restarted := newDashboard(t, client, testToken, homeA)
	again := loginCookie(t, restarted.URL, testToken)
	require.Equal(t, a.Name, again.Name, "a restart keeps the name")
	resp := withCookie(t, restarted.URL, http.MethodGet, "/", a)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "a restart ends the sessions before it")
	require.Equal(t, http.StatusOK, withCookie(t, restarted.URL, http.MethodGet, "/", again).StatusCode)
}

// The logouts remembered are bounded: those expired are forgotten, and
// past maxRevoked live ones every session ends instead.
func TestRevocationsAreBounded(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	s := newSessions(testToken, time.Hour, clk.Now).forDaemon(t.TempDir())
	logout := func(n int) {
		for range n {
			sess, value := s.issue()
			s.revoke(sess)
			_, ok := s.check(value)
			require.False(t, ok)
		}
	}
	logout(maxRevoked - 1)
	_, live := s.issue()
	clk.Advance(time.Hour) // the revoked expire; live too
	_, live = s.issue()
	logout(10)
	_, ok := s.check(live)
	require.True(t, ok, "the expired were forgotten: no need to end every session")
	require.LessOrEqual(t, len(s.revoked), maxRevoked)

	logout(maxRevoked - 10)
	_, ok = s.check(live)
	require.True(t, ok)
	logout(1) // one more than is remembered
	_, ok = s.check(live)
	require.False(t, ok, "every session ended")
	require.LessOrEqual(t, len(s.revoked), maxRevoked)
}
