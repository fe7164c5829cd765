package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/store"
)

// serveFuzz serves one request to the bundle's handler; a stream ends as
// soon as it starts.
func (b *fuzzBundle) serveFuzz(t *testing.T, method, path, query string, body []byte) *streamRecorder {
	return b.serveFuzzWith(t, method, path, query, body, nil)
}

// serveFuzzWith is serveFuzz with more request headers.
func (b *fuzzBundle) serveFuzzWith(t *testing.T, method, path, query string, body []byte, header http.Header) *streamRecorder {
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	req := (&http.Request{
		Method: method, URL: &url.URL{Path: path, RawQuery: query}, RequestURI: path + "?" + query,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Host: "127.0.0.1:7780",
		Header: http.Header{"Authorization": {"Bearer " + testToken}},
		Body:   io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
	}).WithContext(ctx)
	for k, vs := range header {
		req.Header[k] = vs
	}
	rec := &streamRecorder{ResponseRecorder: httptest.NewRecorder(), cancel: cancel}
	b.handler.ServeHTTP(rec, req)
	return rec
}

// queryNames are the parameter names of a query string that parses.
func queryNames(t *testing.T, raw string) []string {
	var names []string
	for pair := range strings.SplitSeq(raw, "&") {
		if pair == "" {
			continue
		}
		rawName, _, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(rawName)
		require.NoError(t, err)
		names = append(names, name)
	}
	return names
}

// FuzzQueryParams sends arbitrary query strings to every REST route. A
// route answers below 500 and never ignores a parameter: an answer that
// is not an error means every parameter given is one the route reads, and
// a query that parses but names another is a 400 naming it.
func FuzzQueryParams(f *testing.F) {
	for i := range fuzzRoutes {
		for _, q := range []string{
			"", "flagged=maybe", "Limit=5", "fl%61gged=1", "verbose", "=1", "&&", "token=x", "after=0&types=task.created",
			"status=pending&status=failed", "limit=2&cursor=", "a=1;b=2", "q=%ff", "%ff=1", "task_id=x&agent=a&source=user",
			"session=s&all=true", "reason=because", "after=0&token=x", "types=x&types=y",
		} {
			f.Add(uint8(i), uint8(i%5), q)
		}
	}
	b := newFuzzBundle(f)

	f.Fuzz(func(t *testing.T, route, which uint8, query string) {
		r := fuzzRoutes[int(route)%len(fuzzRoutes)]
		if r.method != "GET" {
			return // writes want bodies (FuzzAPI's); here the query is what varies
		}
		path := strings.ReplaceAll(r.path, "{id}", b.ids[int(which)%len(b.ids)])
		before := b.dataVersion(t)
		rec := b.serveFuzz(t, r.method, path, query, nil)
		require.Less(t, rec.Code, 500, "%s %s?%s: %s", r.method, path, query, rec.Body.String())
		if rec.Code >= 400 {
			require.Equal(t, before, b.dataVersion(t), "refused %s %s?%s changed the store", r.method, path, query)
		}
		known, isRoute := b.server.params[r.method+" "+r.path]
		if !isRoute || checkQuery(query) != nil {
			return
		}
		var unknown []string
		for _, name := range queryNames(t, query) {
			if !slices.Contains(known, name) {
				unknown = append(unknown, name)
			}
		}
		if len(unknown) == 0 {
			require.NotContains(t, rec.Body.String(), "unknown query parameter", "%s %s?%s", r.method, path, query)
			return
		}
		require.Equal(t, http.StatusBadRequest, rec.Code, "%s %s?%s names %q: %s", r.method, path, query, unknown, rec.Body.String())
		var e api.ErrorBody
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), rec.Body.String())
		require.Contains(t, unknown, e.Error.Field, rec.Body.String())
	})
}

// FuzzPostEvent sends arbitrary bodies to POST /api/events: never a 5xx,
// a refused body changes nothing, and no type errand writes itself is
// ever journaled, whatever its case or spelling.
func FuzzPostEvent(f *testing.F) {
	for _, s := range []string{
		`{"type":"deploy.finished","data":{"env":"prod"}}`, `{"type":"memory.created","data":{"id":"mem_x"}}`,
		`{"type":"Task.completed"}`, `{"type":"a2a.push_config_set"}`, `{"type":"ALERT"}`, `{"type":"alerts"}`,
		`{"type":"tas\u212a.completed"}`, `{"type":"schedule.skipped","data":{"reason":"overlap"}}`, `{"type":"task.deferred"}`,
		`{"type":"budget.alert","data":null}`, `{"type":"memory.purged","type":"ping"}`, `{"Type":"memory.created"}`,
		`{"type":"ping"} {}`, `{"type":"` + strings.Repeat("x", 200) + `"}`, `{"type":""}`, `{}`, ``, `null`, `[]`,
		`{"type":"heartbeat.decision","data":[1]}`, `{"type":"deploy.finished","actor":"me"}`,
	} {
		f.Add([]byte(s))
	}
	b := newFuzzBundle(f)

	f.Fuzz(func(t *testing.T, body []byte) {
		before := b.dataVersion(t)
		rec := b.serveFuzz(t, "POST", "/api/events", "", body)
		require.Less(t, rec.Code, 500, "%q: %s", body, rec.Body.String())
		require.True(t, json.Valid(rec.Body.Bytes()), rec.Body.String())
		if rec.Code >= 400 {
			require.Equal(t, before, b.dataVersion(t), "refused %q changed the store: %s", body, rec.Body.String())
			var e api.ErrorBody
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), rec.Body.String())
			require.NotEmpty(t, e.Error.Message)
			return
		}
		require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
		var ev api.Event
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &ev), rec.Body.String())
		require.False(t, store.IsOwnEventType(ev.Type), "%q was journaled from %q", ev.Type, body)
		require.Equal(t, errand.ActorExternal, ev.Actor)
	})
}

// FuzzIdempotencyKeyHeader: whatever Idempotency-Key header and field a
// client sends, POST /api/tasks answers without a 5xx, a refusal writes
// nothing, and a task it made comes back (200, the same id) when the same
// request is sent again.
func FuzzIdempotencyKeyHeader(f *testing.F) {
	for _, seed := range [][2]string{
		{"k1", ""}, {"", "k1"}, {"k1", "k1"}, {"k1", "k2"}, {" ", ""}, {"\xff", ""}, {strings.Repeat("k", 300), ""}, {"a\tb", "a\tb"},
	} {
		f.Add(seed[0], seed[1])
	}
	b := newFuzzBundle(f)
	f.Fuzz(func(t *testing.T, header, field string) {
		body, err := json.Marshal(map[string]any{"goal": "fuzz the key", "idempotency_key": field})
		require.NoError(t, err)
		h := http.Header{"Idempotency-Key": {header}}
		before := b.dataVersion(t)
		first := b.serveFuzzWith(t, "POST", "/api/tasks", "", body, h)
		require.Less(t, first.Code, 500, "%q / %q: %s", header, field, first.Body.String())
		if first.Code >= 400 {
			require.Equal(t, before, b.dataVersion(t), "a refused key changed the store")
			return
		}
		var made api.Task
		require.NoError(t, json.Unmarshal(first.Body.Bytes(), &made))
		again := b.serveFuzzWith(t, "POST", "/api/tasks", "", body, h)
		require.Equal(t, http.StatusOK, again.Code, again.Body.String())
		var replay api.Task
		require.NoError(t, json.Unmarshal(again.Body.Bytes(), &replay))
		require.Equal(t, made.ID, replay.ID)
	})
}
