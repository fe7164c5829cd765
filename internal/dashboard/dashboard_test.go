package dashboard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
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

const testToken = "test-token-0123456789"

type harness struct {
	client *errand.Client
	clock  *clock.Fake
	srv    *httptest.Server
	home   string // the data directory, for artifacts
}

func setup(t *testing.T) *harness {
	t.Helper()
	client, err := errand.Open(t.Context(), "sqlite://"+filepath.Join(t.TempDir(), "errand.db"), &errand.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	clk := clock.NewFake(time.Now())
	home := t.TempDir()
	d, err := New(Config{Client: client, Token: testToken, Clock: clk, Home: home})
	require.NoError(t, err)
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	return &harness{client: client, clock: clk, srv: srv, home: home}
}

// browser is an HTTP client that keeps cookies and does not follow
// redirects, so each answer can be looked at.
func (h *harness) browser(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// waitForKeepAlive waits until a live stream runs its keep-alive ticker,
// which it starts after saying it is live.
func (h *harness) waitForKeepAlive(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	require.NoError(t, h.clock.WaitForTicker(ctx, "(*Dashboard).stream", 15*time.Second))
}

// waitForThrottle waits until a live stream has armed the timer that
// throttles its "changed" announcements. The stream also runs the
// keep-alive ticker, so the timer is told from it by its period: a timer's
// is 0.
func (h *harness) waitForThrottle(t *testing.T, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	require.NoError(t, h.clock.WaitForTicker(ctx, "(*Dashboard).stream", 0), msg)
}

func (h *harness) login(t *testing.T, b *http.Client) {
	t.Helper()
	resp, err := b.PostForm(h.srv.URL+"/login", url.Values{"token": {testToken}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
}

func get(t *testing.T, b *http.Client, u string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := b.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

func post(t *testing.T, b *http.Client, u string, form url.Values, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, u, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := b.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

// csrfOf finds the page's CSRF token in a form field.
func csrfOf(t *testing.T, page string) string {
	t.Helper()
	const marker = `name="csrf" value="`
	i := strings.Index(page, marker)
	require.NotEqual(t, -1, i, "the page has a CSRF field")
	rest := page[i+len(marker):]
	return rest[:strings.IndexByte(rest, '"')]
}

func TestPagesNeedALogin(t *testing.T) {
	h := setup(t)
	b := h.browser(t)
	for _, path := range []string{"/", "/tasks/tsk_x", "/tasks/rows", "/live", "/nowhere"} {
		resp, _ := get(t, b, h.srv.URL+path)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, path)
		require.Equal(t, "/login", resp.Header.Get("Location"), path)
	}
	resp, _ := get(t, b, h.srv.URL+"/tasks/rows", "HX-Request", "true")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, "/login", resp.Header.Get("HX-Redirect"))
	resp, body := get(t, b, h.srv.URL+"/login")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `name="token"`)
}

func TestLoginWithTheTokenSetsAStrictHttpOnlyCookie(t *testing.T) {
	h := setup(t)
	b := h.browser(t)

	resp, body := post(t, b, h.srv.URL+"/login", url.Values{"token": {"wrong"}})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Empty(t, resp.Cookies())
	require.Contains(t, body, "not the API token")

	resp, _ = post(t, b, h.srv.URL+"/login", url.Values{"token": {testToken}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	cookies := resp.Cookies()
	require.Len(t, cookies, 1)
	require.True(t, strings.HasPrefix(cookies[0].Name, sessionCookie+"_"), "the daemon's own name: %s", cookies[0].Name)
	require.True(t, cookies[0].HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, cookies[0].SameSite)
	require.NotContains(t, cookies[0].Value, testToken)

	resp, body = get(t, b, h.srv.URL+"/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "<h1>Tasks</h1>")

	// Logging out ends the session.
	resp, _ = post(t, b, h.srv.URL+"/logout", url.Values{"csrf": {csrfOf(t, body)}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp, _ = get(t, b, h.srv.URL+"/")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
}

func TestCrossSiteLoginIsRefused(t *testing.T) {
	h := setup(t)
	resp, _ := post(t, h.browser(t), h.srv.URL+"/login", url.Values{"token": {testToken}}, "Sec-Fetch-Site", "cross-site")
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Empty(t, resp.Cookies())
}

func TestForgedExpiredOrOtherTokensSessionsAreRefused(t *testing.T) {
	h := setup(t)
	b := h.browser(t)
	h.login(t, b)
	u, _ := url.Parse(h.srv.URL)
	good, name := b.Jar.Cookies(u)[0].Value, b.Jar.Cookies(u)[0].Name

	forge := func(value string) int {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, h.srv.URL+"/", nil)
		req.AddCookie(&http.Cookie{Name: name, Value: value})
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, forge(good))
	payload, sig, _ := strings.Cut(good, ".")
	require.Equal(t, http.StatusSeeOther, forge(payload+"."+sig[:len(sig)-2]+"AA"), "a bad signature")
	require.Equal(t, http.StatusSeeOther, forge("garbage"))
	other := newSessions("another-token", time.Hour, h.clock.Now)
	_, otherValue := other.issue()
	require.Equal(t, http.StatusSeeOther, forge(otherValue), "signed with another token")

	h.clock.Advance(DefaultSessionTTL + time.Second)
	require.Equal(t, http.StatusSeeOther, forge(good), "expired")
}

func TestStateChangesNeedTheSessionsCSRFToken(t *testing.T) {
	h := setup(t)
	b := h.browser(t)
	h.login(t, b)
	task, err := h.client.Submit(t.Context(), &errand.SubmitParams{Goal: "keep going"})
	require.NoError(t, err)
	_, page := get(t, b, h.srv.URL+"/tasks/"+task.ID)
	token := csrfOf(t, page)
	cancelURL := h.srv.URL + "/tasks/" + task.ID + "/cancel"

	for name, try := range map[string]func() *http.Response{
		"no token":    func() *http.Response { r, _ := post(t, b, cancelURL, url.Values{}); return r },
		"wrong token": func() *http.Response { r, _ := post(t, b, cancelURL, url.Values{"csrf": {token + "x"}}); return r },
		"cross-site": func() *http.Response {
			r, _ := post(t, b, cancelURL, url.Values{"csrf": {token}}, "Sec-Fetch-Site", "cross-site")
			return r
		},
		"another session's token": func() *http.Response {
			other := h.browser(t)
			h.login(t, other)
			_, otherPage := get(t, other, h.srv.URL+"/")
			r, _ := post(t, b, cancelURL, url.Values{"csrf": {csrfOf(t, otherPage)}})
			return r
		},
	} {
		require.Equal(t, http.StatusForbidden, try().StatusCode, name)
		got, err := h.client.Get(t.Context(), task.ID)
		require.NoError(t, err)
		require.Equal(t, errand.StatusPending, got.Status, "%s: nothing changed", name)
	}

	resp, _ := post(t, b, cancelURL, url.Values{"csrf": {token}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	got, err := h.client.Get(t.Context(), task.ID)
	require.NoError(t, err)
	require.Equal(t, errand.StatusCancelled, got.Status)

	// htmx sends the token as a header.
	again, err := h.client.Submit(t.Context(), &errand.SubmitParams{Goal: "pause me"})
	require.NoError(t, err)
	resp, _ = post(t, b, h.srv.URL+"/tasks/"+again.ID+"/pause", url.Values{}, "X-CSRF-Token", token)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	got, err = h.client.Get(t.Context(), again.ID)
	require.NoError(t, err)
	require.Equal(t, errand.StatusPaused, got.Status)
}

// Nothing from a task is rendered as HTML.
func TestTaskTextIsShownAsText(t *testing.T) {
	h := setup(t)
	b := h.browser(t)
	h.login(t, b)
	const evil = `<script>alert("x")</script><img src=x onerror=alert(1)>`
	task, err := h.client.Submit(t.Context(), &errand.SubmitParams{Goal: evil, Title: evil, Input: json.RawMessage(`{"q":"` + strings.ReplaceAll(evil, `"`, `\"`) + `"}`)})
	require.NoError(t, err)

	for _, path := range []string{"/", "/tasks/rows", "/tasks/" + task.ID, "/tasks/" + task.ID + "/live"} {
		resp, body := get(t, b, h.srv.URL+path)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.NotContains(t, body, "<script>alert", path)
		require.NotContains(t, body, "<img src=x", path)
	}
	_, body := get(t, b, h.srv.URL+"/tasks/"+task.ID)
	require.Contains(t, body, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;")
}

func TestEveryPageSendsTheSecurityHeaders(t *testing.T) {
	h := setup(t)
	b := h.browser(t)
	h.login(t, b)
	for _, path := range []string{"/", "/login", "/nowhere", "/static/app.css"} {
		resp, _ := get(t, b, h.srv.URL+path)
		csp := resp.Header.Get("Content-Security-Policy")
		require.Contains(t, csp, "script-src 'self'", path)
		require.NotContains(t, csp, "unsafe-inline", path)
		require.NotContains(t, csp, "unsafe-eval", path)
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), path)
		require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"), path)
	}
	resp, body := get(t, b, h.srv.URL+"/nowhere")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Contains(t, body, "No such page")
}

func TestFiltersAreChecked(t *testing.T) {
	h := setup(t)
	b := h.browser(t)
	h.login(t, b)
	for _, q := range []string{"status=sleeping", "agent=%FF", "cursor=%FE", "q=a%00b", "q=%FF"} {
		resp, _ := get(t, b, h.srv.URL+"/?"+q)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, q)
	}
	_, err := h.client.Submit(t.Context(), &errand.SubmitParams{Goal: "listed", SessionID: "s1"})
	require.NoError(t, err)
	_, body := get(t, b, h.srv.URL+"/?status=pending&session=s1")
	require.Contains(t, body, "listed")
	_, body = get(t, b, h.srv.URL+"/?session=s2")
	require.Contains(t, body, "No tasks match these filters")

	_, err = h.client.Submit(t.Context(), &errand.SubmitParams{Goal: "Compare 100% of the vendors", Title: "Vendor review"})
	require.NoError(t, err)
	_, body = get(t, b, h.srv.URL+"/?q=VENDOR")
	require.Contains(t, body, "Vendor review")
	require.NotContains(t, body, "listed")
	_, body = get(t, b, h.srv.URL+"/tasks/rows?q=100%25")
	require.Contains(t, body, "Vendor review", "the live refresh keeps the text filter")
	_, body = get(t, b, h.srv.URL+"/?q=%25%25")
	require.Contains(t, body, "No tasks match these filters", "%% is text, not a wildcard")
}

// The vendored client libraries are exactly the pinned releases.
func TestVendoredFilesMatchTheirChecksums(t *testing.T) {
	raw, err := staticFS.ReadFile("static/vendor/vendor.json")
	require.NoError(t, err)
	var manifest struct {
		Files map[string]struct{ SHA256 string } `json:"files"`
	}
	require.NoError(t, json.Unmarshal(raw, &manifest))
	entries, err := staticFS.ReadDir("static/vendor")
	require.NoError(t, err)
	require.Len(t, entries, len(manifest.Files)+1, "every vendored file is listed")
	for name, f := range manifest.Files {
		b, err := staticFS.ReadFile("static/vendor/" + name)
		require.NoError(t, err, name)
		sum := sha256.Sum256(b)
		require.Equal(t, f.SHA256, hex.EncodeToString(sum[:]), name)
	}
}

// The live stream of a task says "changed" when the task changes, once
// the throttle has passed.
func TestLiveStreamSaysChanged(t *testing.T) {
	h := setup(t)
	b := h.browser(t)
	h.login(t, b)
	mine, err := h.client.Submit(t.Context(), &errand.SubmitParams{Goal: "watched"})
	require.NoError(t, err)

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, h.srv.URL+"/live?task="+mine.ID, nil)
	require.NoError(t, err)
	resp, err := b.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				lines <- string(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	require.Contains(t, <-lines, ": live")
	h.waitForKeepAlive(t)

	_, err = h.client.Pause(t.Context(), mine.ID, false)
	require.NoError(t, err)
	_, err = h.client.Resume(t.Context(), mine.ID, false)
	require.NoError(t, err)
	h.waitForThrottle(t, "the change started no throttle")
	h.clock.Advance(liveThrottle)
	select {
	case got := <-lines:
		require.Equal(t, "event: changed\ndata: \n\n", got)
	case <-time.After(10 * time.Second):
		t.Fatal("no change announced")
	}
}

// waitEvent waits until task writes an event of type typ.
func waitEvent(t *testing.T, c *errand.Client, taskID, typ string) {
	t.Helper()
	sub, err := c.Subscribe(t.Context(), errand.EventFilter{TaskID: taskID, Types: []string{typ}}, 0)
	require.NoError(t, err)
	defer sub.Close()
	select {
	case <-sub.Events():
	case <-time.After(30 * time.Second):
		t.Fatalf("task %s wrote no %s", taskID, typ)
	}
}

// A question waits in the people's queue, is answered from it, and the
// task goes on with the answer; a failed task shows on the health page
// under its error code and runs again when retried.
func TestQueueAnswerAndHealthRetry(t *testing.T) {
	h := setup(t)
	b := h.browser(t)
	h.login(t, b)
	agent := errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
		switch run.Task().Goal {
		case "ask":
			answers, err := run.Answers(ctx)
			if err != nil {
				return errand.Result{}, err
			}
			if len(answers) == 0 {
				return errand.Result{}, errand.AskUser("<b>which</b> one?")
			}
			return errand.Result{Output: answers[0].Answer}, nil
		default:
			return errand.Result{}, errand.NonRetryable("boom", errors.New("<i>broke</i>"))
		}
	})
	require.NoError(t, h.client.RegisterAgent("default", agent))
	engine, err := errand.NewEngine(h.client, &errand.EngineConfig{Workers: 2})
	require.NoError(t, err)
	require.NoError(t, engine.Start(t.Context()))
	t.Cleanup(func() { _ = engine.Stop(context.Background()) })

	asking, err := h.client.Submit(t.Context(), &errand.SubmitParams{Goal: "ask"})
	require.NoError(t, err)
	failing, err := h.client.Submit(t.Context(), &errand.SubmitParams{Goal: "fail"})
	require.NoError(t, err)
	waitEvent(t, h.client, asking.ID, "task.input_required")
	waitEvent(t, h.client, failing.ID, "task.failed")

	resp, page := get(t, b, h.srv.URL+"/queue")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, "&lt;b&gt;which&lt;/b&gt; one?")
	require.Contains(t, page, `action="/tasks/`+asking.ID+`/answer"`)
	resp, _ = post(t, b, h.srv.URL+"/tasks/"+asking.ID+"/answer", url.Values{"csrf": {csrfOf(t, page)}, "answer": {"the blue one"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	waitEvent(t, h.client, asking.ID, "task.completed")
	got, err := h.client.Get(t.Context(), asking.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"output": "the blue one", "warning": null}`, string(got.Result))

	resp, page = get(t, b, h.srv.URL+"/health")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, "<code>boom</code>")
	resp, _ = post(t, b, h.srv.URL+"/tasks/"+failing.ID+"/retry", url.Values{"csrf": {csrfOf(t, page)}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	waitEvent(t, h.client, failing.ID, "task.retried")

	// Retrying a task that did not fail is refused, and says why.
	resp, page = post(t, b, h.srv.URL+"/tasks/"+asking.ID+"/retry", url.Values{"csrf": {csrfOf(t, page)}})
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, page, "completed")
}

func TestMoneyPageShowsSpendAgainstTheLimits(t *testing.T) {
	h := setup(t)
	b := h.browser(t)
	h.login(t, b)
	_, err := h.client.SetSpendLimits(t.Context(), errand.SpendLimits{DailyUSD: 2, MonthlyUSD: 20, OnLimit: "pause-all", Timezone: "UTC"})
	require.NoError(t, err)
	resp, page := get(t, b, h.srv.URL+"/money")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, "$0.0000 of $2.0000")
	require.Contains(t, page, "$0.0000 of $20.0000")
	require.Contains(t, page, "<svg")
}

func TestSpendBarWidths(t *testing.T) {
	for _, c := range []struct {
		spent, limit float64
		width        int
	}{
		{0, 0, 0}, {1, 0, 400}, {0, 5, 0}, {2.5, 5, 200}, {5, 5, 400}, {9, 5, 400},
	} {
		require.Equal(t, c.width, barOf("x", c.spent, c.limit).Width, "%v of %v", c.spent, c.limit)
	}
}

func TestSchedulesCanBeDisabledEnabledAndRunNow(t *testing.T) {
	h := setup(t)
	b := h.browser(t)
	h.login(t, b)
	sch, err := h.client.CreateSchedule(t.Context(), &errand.ScheduleParams{
		Name: "nightly-tidy", Kind: "cron", Spec: "0 3 * * *", Task: json.RawMessage(`{"goal":"tidy up"}`)})
	require.NoError(t, err)

	resp, page := get(t, b, h.srv.URL+"/schedules")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, "nightly-tidy")
	require.Contains(t, page, "0 3 * * *")
	token := csrfOf(t, page)

	resp, _ = post(t, b, h.srv.URL+"/schedules/"+sch.ID+"/disable", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	got, err := h.client.Schedule(t.Context(), sch.ID)
	require.NoError(t, err)
	require.False(t, got.Enabled)
	resp, _ = post(t, b, h.srv.URL+"/schedules/"+sch.ID+"/enable", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	got, err = h.client.Schedule(t.Context(), sch.ID)
	require.NoError(t, err)
	require.True(t, got.Enabled)

	resp, _ = post(t, b, h.srv.URL+"/schedules/"+sch.ID+"/run", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	taskID := strings.TrimPrefix(resp.Header.Get("Location"), "/tasks/")
	task, err := h.client.Get(t.Context(), taskID)
	require.NoError(t, err)
	require.Equal(t, "tidy up", task.Goal)

	resp, _ = post(t, b, h.srv.URL+"/schedules/sch_nope/run", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = post(t, b, h.srv.URL+"/schedules/"+sch.ID+"/explode", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = post(t, b, h.srv.URL+"/schedules/"+sch.ID+"/disable", url.Values{})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "no CSRF token")
}

// What was written between a page's read and its stream's connection is
// announced too: the page says how far it read.
func TestLiveStreamAnnouncesWhatCameBeforeItConnected(t *testing.T) {
	h := setup(t)
	b := h.browser(t)
	h.login(t, b)
	task, err := h.client.Submit(t.Context(), &errand.SubmitParams{Goal: "watched"})
	require.NoError(t, err)
	_, page := get(t, b, h.srv.URL+"/tasks/"+task.ID)
	read, err := h.client.LastEventID(t.Context())
	require.NoError(t, err)
	require.Contains(t, page, fmt.Sprintf("/live?task=%s&amp;after=%d", task.ID, read))
	_, err = h.client.Pause(t.Context(), task.ID, false) // after the read, before the stream
	require.NoError(t, err)

	resp, _ := get(t, b, h.srv.URL+"/live?task="+task.ID+"&after=-1")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, fmt.Sprintf("%s/live?task=%s&after=%d", h.srv.URL, task.ID, read), nil)
	require.NoError(t, err)
	resp, err = b.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	h.waitForThrottle(t, "the pause written before the stream connected started no throttle")
	h.clock.Advance(liveThrottle)
	buf := make([]byte, 256)
	var got string
	for !strings.Contains(got, "event: changed") {
		n, err := resp.Body.Read(buf)
		require.NoError(t, err)
		got += string(buf[:n])
	}
}

// A question whose task is cancelled leaves the people's queue and the
// task's page, answer form and all; the other task's question stays.
func TestCancelledTasksQuestionLeavesTheQueue(t *testing.T) {
	h := setup(t)
	b := h.browser(t)
	h.login(t, b)
	agent := errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
		answers, err := run.Answers(ctx)
		if err != nil {
			return errand.Result{}, err
		}
		if len(answers) == 0 {
			return errand.Result{}, errand.AskUser("question of " + run.Task().Goal)
		}
		return errand.Result{Output: answers[0].Answer}, nil
	})
	require.NoError(t, h.client.RegisterAgent("default", agent))
	engine, err := errand.NewEngine(h.client, &errand.EngineConfig{Workers: 2})
	require.NoError(t, err)
	require.NoError(t, engine.Start(t.Context()))
	t.Cleanup(func() { _ = engine.Stop(context.Background()) })

	var tasks []*errand.Task
	for _, goal := range []string{"cancelled", "kept"} {
		task, err := h.client.Submit(t.Context(), &errand.SubmitParams{Goal: goal})
		require.NoError(t, err)
		waitEvent(t, h.client, task.ID, "task.input_required")
		tasks = append(tasks, task)
	}
	cancelled, kept := tasks[0], tasks[1]
	_, page := get(t, b, h.srv.URL+"/queue")
	for _, task := range tasks {
		require.Contains(t, page, `action="/tasks/`+task.ID+`/answer"`)
		require.Contains(t, page, "question of "+task.Goal)
	}

	// Cancelled from the dashboard, as a person would.
	_, page = get(t, b, h.srv.URL+"/tasks/"+cancelled.ID)
	require.Contains(t, page, `action="/tasks/`+cancelled.ID+`/answer"`)
	resp, _ := post(t, b, h.srv.URL+"/tasks/"+cancelled.ID+"/cancel", url.Values{"csrf": {csrfOf(t, page)}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	got, err := h.client.Get(t.Context(), cancelled.ID)
	require.NoError(t, err)
	require.Equal(t, errand.StatusCancelled, got.Status)

	resp, page = get(t, b, h.srv.URL+"/queue")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	// The inbox keeps the notification that the question was asked; the
	// questions section is what may be answered.
	questions, _, ok := strings.Cut(page, "<h2>Inbox</h2>")
	require.True(t, ok)
	require.NotContains(t, questions, `action="/tasks/`+cancelled.ID+`/answer"`, "no answer form for a cancelled task")
	require.NotContains(t, questions, "question of cancelled")
	require.Contains(t, questions, `action="/tasks/`+kept.ID+`/answer"`)
	require.Contains(t, questions, "question of kept")
	require.Equal(t, 1, strings.Count(questions, `<form class="question"`))

	// The task page's history keeps the question; its live part, where
	// the answer form was, does not.
	_, page = get(t, b, h.srv.URL+"/tasks/"+cancelled.ID)
	require.NotContains(t, page, `action="/tasks/`+cancelled.ID+`/answer"`)
	_, live, ok := strings.Cut(page, `<section class="live">`)
	require.True(t, ok)
	live, _, _ = strings.Cut(live, "</section>")
	require.NotContains(t, live, "question of cancelled")
	pending, err := h.client.Inputs(t.Context(), "pending", cancelled.ID)
	require.NoError(t, err)
	require.Empty(t, pending)

	// An answer sent from a page loaded before the cancel is refused.
	resp, page = post(t, b, h.srv.URL+"/tasks/"+cancelled.ID+"/answer", url.Values{"csrf": {csrfOf(t, page)}, "answer": {"too late"}})
	require.Equal(t, http.StatusConflict, resp.StatusCode, page)
}
