package server

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/store"
)

func (f *fixture) memories(query string) *api.MemoryList {
	f.t.Helper()
	res, b := f.do("GET", "/api/memories?"+query, "")
	require.Equal(f.t, http.StatusOK, res.StatusCode, string(b))
	var l api.MemoryList
	require.NoError(f.t, json.Unmarshal(b, &l), string(b))
	return &l
}

func memoryIDs(l *api.MemoryList) []string {
	ids := make([]string, len(l.Memories))
	for i, m := range l.Memories {
		ids[i] = m.ID
	}
	return ids
}

func TestMemoriesOverHTTP(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := t.Context()
	t1 := f.submit(`{"goal":"one"}`)
	t2 := f.submit(`{"goal":"two"}`)
	remember := func(p errand.RememberParams) *errand.Memory {
		m, err := f.client.Remember(ctx, &p)
		require.NoError(t, err)
		return m
	}
	a := remember(errand.RememberParams{Text: "The build cache lives in /var/cache/ci", Tags: []string{"ci"}, TaskID: t1.ID, Agent: "builder"})
	b := remember(errand.RememberParams{Text: "Flaky test: TestUpload, retry once", TaskID: t1.ID, Agent: "builder", Source: store.SourceSchedule})
	c := remember(errand.RememberParams{Text: "Release notes go to the wiki", TaskID: t2.ID, Agent: "writer"})
	loose := remember(errand.RememberParams{Text: "Office closes at six"})

	// The wire shape, exactly.
	res, body := f.do("GET", "/api/memories/"+a.ID, "")
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	require.JSONEq(t, `{"id":"`+a.ID+`","text":"The build cache lives in /var/cache/ci","tags":["ci"],"task_id":"`+t1.ID+
		`","agent":"builder","source":"user","estimated_tokens":`+jsonInt(a.EstimatedTokens)+`,"created_at":"`+
		a.CreatedAt.UTC().Format("2006-01-02T15:04:05.999999999Z07:00")+`"}`, string(body))
	res, body = f.do("GET", "/api/memories/"+loose.ID, "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, string(body), `"task_id":null,"agent":null`)

	// Lists: newest first, filtered, paged.
	require.Equal(t, []string{loose.ID, c.ID, b.ID, a.ID}, memoryIDs(f.memories("")))
	require.Equal(t, []string{b.ID, a.ID}, memoryIDs(f.memories("task_id="+t1.ID)))
	require.Equal(t, []string{c.ID}, memoryIDs(f.memories("agent=writer")))
	require.Equal(t, []string{b.ID}, memoryIDs(f.memories("source=schedule")))
	page := f.memories("limit=3")
	require.Equal(t, []string{loose.ID, c.ID, b.ID}, memoryIDs(page))
	require.NotEmpty(t, page.NextCursor)
	page = f.memories("limit=3&cursor=" + url.QueryEscape(page.NextCursor))
	require.Equal(t, []string{a.ID}, memoryIDs(page))
	require.Empty(t, page.NextCursor)

	// Search: ranked, filtered, no syntax.
	require.Equal(t, []string{b.ID}, memoryIDs(f.memories("q=flaky+upload")))
	require.Equal(t, []string{a.ID}, memoryIDs(f.memories("q=cache+OR+wiki&agent=builder")))
	require.Empty(t, f.memories("q="+url.QueryEscape(`"unbalanced (NEAR`)).Memories)
	require.Equal(t, []*api.Memory{}, f.memories("q=nothing+matches").Memories)

	// Delete one.
	res, body = f.do("DELETE", "/api/memories/"+c.ID, "")
	require.Equal(t, http.StatusNoContent, res.StatusCode, string(body))
	res, body = f.do("DELETE", "/api/memories/"+c.ID, "")
	e := requireError(t, res, body, http.StatusNotFound, api.CodeNotFound)
	require.Equal(t, "no memory "+c.ID, e.Message)

	// Purge by task: exactly that task's memories.
	res, body = f.do("POST", "/api/memories/purge", `{"task_id":"`+t1.ID+`"}`)
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	require.JSONEq(t, `{"purged":2}`, string(body))
	require.Equal(t, []string{loose.ID}, memoryIDs(f.memories("")))
	res, body = f.do("POST", "/api/memories/purge", `{"task_id":"`+t1.ID+`"}`)
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	require.JSONEq(t, `{"purged":0}`, string(body))
	res, body = f.do("POST", "/api/memories/purge", `{"source":"user"}`)
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	require.JSONEq(t, `{"purged":1}`, string(body))

	// The journal says who removed what, on the tasks that wrote it.
	for taskID, typ := range map[string]string{t1.ID: store.EventMemoryPurged, t2.ID: store.EventMemoryDeleted} {
		events, err := f.client.History(ctx, taskID)
		require.NoError(t, err)
		last := events[len(events)-1]
		require.Equal(t, typ, last.Type)
		require.Equal(t, store.ActorUser, last.Actor)
	}
}

func jsonInt(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestMemoriesRefuseBadInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	m, err := f.client.Remember(t.Context(), &errand.RememberParams{Text: "stays"})
	require.NoError(t, err)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		field                    string
	}{
		{"empty q", "GET", "/api/memories?q=", "", 400, "q"},
		{"blank q", "GET", "/api/memories?q=+++", "", 400, "q"},
		{"long q", "GET", "/api/memories?q=" + strings.Repeat("w+", 1500), "", 400, "q"},
		{"bad limit", "GET", "/api/memories?limit=0", "", 400, "limit"},
		{"bad source", "GET", "/api/memories?source=robot", "", 400, "source"},
		{"bad task id", "GET", "/api/memories?task_id=42", "", 400, "task_id"},
		{"bad cursor", "GET", "/api/memories?cursor=abc", "", 400, "cursor"},
		{"search with cursor", "GET", "/api/memories?q=x&cursor=abc", "", 400, "cursor"},
		{"query does not parse", "GET", "/api/memories?q=a;b", "", 400, "q"},
		{"purge nothing", "POST", "/api/memories/purge", `{}`, 400, ""},
		{"purge two", "POST", "/api/memories/purge", `{"agent":"a","source":"user"}`, 400, "source"},
		{"purge bad source", "POST", "/api/memories/purge", `{"source":"robot"}`, 400, "source"},
		{"purge bad task", "POST", "/api/memories/purge", `{"task_id":"x"}`, 400, "task_id"},
		{"purge unknown field", "POST", "/api/memories/purge", `{"everything":true}`, 400, "everything"},
		{"purge key case", "POST", "/api/memories/purge", `{"Source":"user"}`, 400, "Source"},
		{"purge trailing", "POST", "/api/memories/purge", `{"source":"user"} {}`, 400, ""},
		{"purge no body", "POST", "/api/memories/purge", ``, 400, ""},
		{"delete with body field", "DELETE", "/api/memories/" + m.ID, `{"force":true}`, 400, "force"},
		{"delete unknown", "DELETE", "/api/memories/mem_01JH0000000000000000000000", "", 404, ""},
		{"delete malformed", "DELETE", "/api/memories/x", "", 404, ""},
		{"get unknown", "GET", "/api/memories/mem_01JH0000000000000000000000", "", 404, ""},
		{"wrong method", "PUT", "/api/memories/purge", "", 405, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := f.do(tc.method, tc.path, tc.body)
			code := map[int]string{400: api.CodeBadRequest, 404: api.CodeNotFound, 405: api.CodeMethodNotAllowed}[tc.status]
			if res.StatusCode == 400 && json.Valid(body) && !jsonHasCode(body, api.CodeBadRequest) {
				code = api.CodeInvalid
			}
			e := requireError(t, res, body, tc.status, code)
			require.Equal(t, tc.field, e.Field, string(body))
		})
	}
	require.Equal(t, []string{m.ID}, memoryIDs(f.memories("")), "nothing was removed")
}

func jsonHasCode(body []byte, code string) bool {
	var e api.ErrorBody
	return json.Unmarshal(body, &e) == nil && e.Error.Code == code
}

// A task may ask for the memory route and its own recall limits.
func TestCreateTaskWithMemoryRoute(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	task := f.submit(`{"goal":"summarize","result_route":"memory","max_memory_tokens":800,"max_memory_entries":4}`)
	require.Equal(t, &api.Route{Type: "memory"}, task.ResultRoute)
	got, err := f.client.Get(t.Context(), task.ID)
	require.NoError(t, err)
	require.Equal(t, 800, got.Options.MaxMemoryTokens)
	require.Equal(t, 4, got.Options.MaxMemoryEntries)

	res, body := f.do("POST", "/api/tasks", `{"goal":"g","max_memory_tokens":-1}`)
	e := requireError(t, res, body, http.StatusBadRequest, api.CodeInvalid)
	require.Equal(t, "max_memory_tokens", e.Field)
	res, body = f.do("POST", "/api/tasks", `{"goal":"g","max_memory_entries":5000}`)
	e = requireError(t, res, body, http.StatusBadRequest, api.CodeInvalid)
	require.Equal(t, "max_memory_entries", e.Field)
}
