package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	pathpkg "path"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
)

// FuzzMemories sends arbitrary query strings to GET /api/memories (the
// search text goes to the full-text index, flagged= to the quarantine
// filter), arbitrary bodies to POST /api/memories/purge, and arbitrary
// ids to GET and DELETE /api/memories/{id} and POST
// /api/memories/{id}/release. The daemon never panics or answers 5xx;
// every answer is JSON; a refused request changes nothing; the memories
// that no request removed are still listed and found; the quarantined
// one stays quarantined, and ?flagged=true lists nothing else.
func FuzzMemories(f *testing.F) {
	const (
		list uint8 = iota
		purge
		get
		del
		release
	)
	seeds := []struct {
		route uint8
		arg   string
	}{
		{list, ""}, {list, "q=deploy"}, {list, "q="}, {list, "q=%20%20"}, {list, `q=%22`}, {list, "q=NEAR(a%20b)"},
		{list, "q=a%20AND%20OR%20NOT"}, {list, "q=prod*"}, {list, "q=text:deploy"}, {list, "q=%00"}, {list, "q=%ff"},
		{list, "q=%27%3B%20DROP%20TABLE%20memories%3B--"}, {list, "q=x&cursor=abc"}, {list, "limit=0"}, {list, "limit=2"},
		{list, "source=heartbeat"}, {list, "source=robot"}, {list, "task_id=tsk_01"}, {list, "agent=a;b"}, {list, "cursor=%%%"},
		{purge, ``}, {purge, `{}`}, {purge, `null`}, {purge, `{"source":"heartbeat"}`}, {purge, `{"task_id":"x"}`},
		{purge, `{"agent":"a","source":"user"}`}, {purge, `{"Agent":"a"}`}, {purge, `{"agent":" "}`}, {purge, `{"agent":"\ud800"}`},
		{purge, `{"agent":"nobody"} x`}, {purge, `{"agent":"nobody","extra":1}`},
		{get, "mem_01JH0000000000000000000000"}, {get, "purge"}, {get, "../tasks"}, {get, ""},
		{del, "mem_01JH0000000000000000000000"}, {del, "nope"}, {del, "%00"},
		{list, "flagged=true"}, {list, "flagged=false"}, {list, "flagged="}, {list, "flagged=yes"}, {list, "flagged=TRUE"},
		{list, "flagged=true&flagged=false"}, {list, "flagged=true&q=ignore"}, {list, "flagged=%00"}, {list, "flagged=true;x"},
		{release, "mem_01JH0000000000000000000000"}, {release, "x"}, {release, "purge"}, {release, "%2e%2e"}, {release, ""},
	}
	for _, s := range seeds {
		f.Add(s.route, s.arg)
	}
	b := newFuzzBundle(f)
	// Memories no request may remove: the purges aimed at them name
	// another agent, and DELETE needs their exact id.
	kept, err := b.client.Remember(f.Context(), &errand.RememberParams{Text: "deploys need the checklist", Agent: "keeper", Tags: []string{"ops"}})
	require.NoError(f, err)
	quarantined, err := b.client.Remember(f.Context(), &errand.RememberParams{Text: injectionText, Agent: "keeper"})
	require.NoError(f, err)
	require.NotNil(f, quarantined.Flagged)

	serve := func(t *testing.T, method, path, query string, body []byte) *httptest.ResponseRecorder {
		// The id is one escaped path segment, as a client sends it.
		dir, last := path[:strings.LastIndex(path, "/")+1], path[strings.LastIndex(path, "/")+1:]
		u := &url.URL{Path: path, RawPath: dir + url.PathEscape(last), RawQuery: query}
		req := &http.Request{
			Method: method, URL: u, RequestURI: u.RequestURI(),
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Host: "example.com",
			Header: http.Header{"Authorization": {"Bearer " + testToken}},
			Body:   io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
		}
		req = req.WithContext(t.Context())
		rec := httptest.NewRecorder()
		b.handler.ServeHTTP(rec, req)
		return rec
	}

	f.Fuzz(func(t *testing.T, route uint8, arg string) {
		var (
			method, path, query string
			body                []byte
		)
		switch route % 5 {
		case list:
			method, path, query = "GET", "/api/memories", arg
		case purge:
			method, path, body = "POST", "/api/memories/purge", []byte(arg)
			var p api.PurgeMemories
			if json.Unmarshal(body, &p) == nil && (p.Agent == "keeper" || p.Source == "user") {
				return // would remove what the invariant keeps
			}
		case get:
			method, path = "GET", "/api/memories/"+arg
		case del:
			if arg == kept.ID || arg == quarantined.ID {
				return
			}
			method, path = "DELETE", "/api/memories/"+arg
		default:
			if arg == quarantined.ID {
				return // would release what the invariant keeps flagged
			}
			method, path = "POST", "/api/memories/"+arg+"/release"
		}
		if pathpkg.Clean(path) != path && path != "/api/memories/" {
			return // the router redirects to the clean path before any handler
		}
		before := b.dataVersion(t)
		rec := serve(t, method, path, query, body)
		require.Less(t, rec.Code, 500, "%s %s?%s %q: %s", method, path, query, body, rec.Body.String())
		require.Equal(t, "application/json", rec.Header().Get("Content-Type"), "%s %s?%s %q", method, path, query, body)
		require.True(t, json.Valid(rec.Body.Bytes()), rec.Body.String())
		if rec.Code >= 400 {
			require.Equal(t, before, b.dataVersion(t), "refused %s %s?%s %q changed the store: %s", method, path, query, body, rec.Body.String())
			var e api.ErrorBody
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), rec.Body.String())
			require.NotEmpty(t, e.Error.Code)
			require.NotEmpty(t, e.Error.Message)
		}

		found := serve(t, "GET", "/api/memories", "q=checklist&agent=keeper", nil)
		require.Equal(t, http.StatusOK, found.Code, found.Body.String())
		var l api.MemoryList
		require.NoError(t, json.Unmarshal(found.Body.Bytes(), &l))
		require.Len(t, l.Memories, 1)
		require.Equal(t, kept.ID, l.Memories[0].ID)

		flagged := serve(t, "GET", "/api/memories", "flagged=true", nil)
		require.Equal(t, http.StatusOK, flagged.Code, flagged.Body.String())
		l = api.MemoryList{}
		require.NoError(t, json.Unmarshal(flagged.Body.Bytes(), &l))
		require.Len(t, l.Memories, 1, flagged.Body.String())
		require.Equal(t, quarantined.ID, l.Memories[0].ID)
		require.NotNil(t, l.Memories[0].Flagged)
	})
}
