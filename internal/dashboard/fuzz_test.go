package dashboard

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
)

// A session cookie is accepted only as issued: nothing else a client can
// send passes, and nothing makes the check panic.
func FuzzSessionCookie(f *testing.F) {
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	s := newSessions(testToken, time.Hour, func() time.Time { return at })
	s.random = zeros{} // the same cookie in every fuzz worker
	_, good := s.issue()
	f.Add(good)
	f.Add("")
	f.Add(".")
	f.Add(good + "x")
	f.Add(strings.Replace(good, ".", "..", 1))
	f.Add(good[:len(good)-4] + "\n" + good[len(good)-4:]) // decodes the same
	f.Fuzz(func(t *testing.T, value string) {
		sess, ok := s.check(value)
		if ok != (value == good) {
			t.Fatalf("check(%q) = %v", value, ok)
		}
		if ok && s.csrf(sess) == "" {
			t.Fatal("an accepted session has no CSRF token")
		}
	})
}

// No path, query or form a logged-in browser sends makes a page fail with
// a server error or panic.
func FuzzPages(f *testing.F) {
	client, err := errand.Open(f.Context(), "sqlite://"+filepath.Join(f.TempDir(), "errand.db"), &errand.Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = client.Close() })
	task, err := client.Submit(f.Context(), &errand.SubmitParams{Goal: "fuzzed"})
	if err != nil {
		f.Fatal(err)
	}
	// A child that depends on its parent: the task page draws a tree and
	// a graph.
	if _, err := client.Submit(f.Context(), &errand.SubmitParams{Goal: "child", ParentID: task.ID, DependsOn: []string{task.ID}}); err != nil {
		f.Fatal(err)
	}
	// More schedules than a page shows: the schedules page links on.
	for i := range schedulePageSize + 1 {
		if _, err := client.CreateSchedule(f.Context(), &errand.ScheduleParams{Name: fmt.Sprintf("fuzz-%02d", i), Kind: "cron", Spec: "0 3 * * *",
			Overlap: "buffer_one", Task: []byte(`{"goal":"fuzzed"}`)}); err != nil {
			f.Fatal(err)
		}
	}
	// A quarantined memory and a plain one: the memories page shows a
	// badge and a Release button.
	flagged, err := client.Remember(f.Context(), &errand.RememberParams{Text: injectionText})
	if err != nil {
		f.Fatal(err)
	}
	plain, err := client.Remember(f.Context(), &errand.RememberParams{Text: "a <plain> note", Subject: "notes"})
	if err != nil {
		f.Fatal(err)
	}
	d, err := New(Config{Client: client, Token: testToken, Home: f.TempDir()})
	if err != nil {
		f.Fatal(err)
	}
	sess, cookie := d.sessions.issue()
	csrf := d.sessions.csrf(sess)
	for _, seed := range []string{"/", "/?status=running&agent=a&session=s", "/?cursor=zz", "/tasks/" + task.ID, "/tasks/rows?status=%ff",
		"/tasks/" + task.ID + "/live", "/queue", "/health", "/money", "/schedules", "/tasks/nope", "/static/app.css", "/../etc/passwd",
		"/?q=%25_%5C", "/?q=%00", "/tasks/" + task.ID + "/artifact", "/tasks/..%2F..%2Fetc/artifact",
		"/schedules?cursor=fuzz-49", "/schedules?cursor=%ff", "/schedules?cursor=a&cursor=b", "/schedules?page=2", "/schedules?cursor=%00",
		"/memories", "/memories?flagged=true", "/memories?flagged=%ff", "/memories?cursor=bWVt", "/memories?flagged=true&cursor=%00",
		"/memories/" + flagged.ID, "/memories/" + plain.ID + "?x=1", "/memories/nope", "/memories/..%2F"} {
		f.Add("GET", seed, "")
	}
	f.Add("POST", "/tasks/"+task.ID+"/answer", "answer=%00%ff")
	f.Add("POST", "/tasks/"+task.ID+"/pause", "")
	f.Add("POST", "/tasks/"+task.ID+"/frobnicate", "")
	f.Add("POST", "/tasks/"+task.ID+"/fork", "from_step=1&goal=%00%ff")
	f.Add("POST", "/tasks/"+task.ID+"/fork", "from_step=-1")
	f.Add("POST", "/tasks/"+task.ID+"/fork", "from_step=1&answer=%20")
	f.Add("POST", "/schedules/fuzz-00/disable", "cursor=fuzz-49")
	f.Add("POST", "/schedules/fuzz-00/enable", "cursor=%ff")
	f.Add("POST", "/memories/"+plain.ID+"/release", "back=memory")
	f.Add("POST", "/memories/nope/release", "back=%ff")
	f.Add("POST", "/memories/"+plain.ID+"/forget", "")
	f.Fuzz(func(t *testing.T, method, target, form string) {
		if method != "GET" && method != "POST" {
			return
		}
		u, err := url.ParseRequestURI(target)
		if err != nil || !strings.HasPrefix(u.Path, "/") || u.Path == "/live" || strings.HasSuffix(u.Path, "/live") && strings.Count(u.Path, "/") == 1 ||
			method == "GET" && strings.HasPrefix(u.Path, "/tasks/") && strings.HasSuffix(u.Path, "/output") {
			return // the event streams do not end by themselves
		}
		if u.Path == "/logout" {
			return // it would end the session every later input uses
		}
		req, err := http.NewRequestWithContext(t.Context(), method, "http://errand.test"+u.RequestURI(), strings.NewReader(form))
		if err != nil {
			return // not a request a browser could send
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-CSRF-Token", csrf)
		req.AddCookie(&http.Cookie{Name: d.sessions.name, Value: cookie})
		rec := httptest.NewRecorder()
		d.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s (%q): %d %s", method, target, form, rec.Code, rec.Body.String())
		}
	})
}

// The schedules page's query is refused or read as a cursor that its
// next link carries back unchanged.
func FuzzScheduleCursor(f *testing.F) {
	for _, seed := range []string{"", "cursor=nightly-tidy", "cursor=%ff", "cursor=a%00", "cursor=a&cursor=b", "page=2",
		"cursor=caf%C3%A9+du+matin", "cursor=%E2%80%AE", "cursor=a;b"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return // not a query a browser sends
		}
		cursor, err := scheduleCursor(q)
		if err != nil {
			return
		}
		if !validCursor(cursor) {
			t.Fatalf("accepted %q", cursor)
		}
		// The link the page writes, read back.
		back, err := url.ParseQuery(url.Values{"cursor": {cursor}}.Encode())
		if err != nil {
			t.Fatal(err)
		}
		if again, err := scheduleCursor(back); err != nil || again != cursor {
			t.Fatalf("cursor %q came back as %q, %v", cursor, again, err)
		}
	})
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// The memories page's query is refused or read as a filter and a cursor
// that its links carry back unchanged.
func FuzzMemoriesQuery(f *testing.F) {
	for _, seed := range []string{"", "flagged=true", "flagged=false", "flagged=", "flagged=1", "flagged=true&flagged=true",
		"cursor=bWVtXzAx", "cursor=%ff", "cursor=a%00", "flagged=true&cursor=x", "page=2", "cursor=a;b"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return // not a query a browser sends
		}
		flagged, cursor, err := memoriesQuery(q)
		if err != nil {
			return
		}
		if !validCursor(cursor) || flagged && q.Get("flagged") != "true" {
			t.Fatalf("accepted %q as flagged=%v cursor=%q", raw, flagged, cursor)
		}
		back := url.Values{"cursor": {cursor}}
		if flagged {
			back.Set("flagged", "true")
		}
		again, err := url.ParseQuery(back.Encode())
		if err != nil {
			t.Fatal(err)
		}
		if f2, c2, err := memoriesQuery(again); err != nil || f2 != flagged || c2 != cursor {
			t.Fatalf("%q came back as flagged=%v cursor=%q, %v", raw, f2, c2, err)
		}
	})
}
