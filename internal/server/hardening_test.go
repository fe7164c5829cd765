package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/api"
)

// Times a client sends are checked in UTC: these are inside 0001–9999 where
// they are written, outside once converted.
var outOfRangeTimes = []string{"9999-12-31T23:59:59-23:59", "0000-01-01T00:00:00+23:59"}

func TestTimesOutsideTheStorableRangeAreRefused(t *testing.T) {
	f := newFixture(t, nil)
	f.submit(`{"goal":"already here"}`)
	db := openRaw(t, f.dbPath)
	before := snapshot(t, db)

	for _, at := range outOfRangeTimes {
		res, body := f.do("POST", "/api/tasks", `{"goal":"later","run_at":"`+at+`"}`)
		e := requireError(t, res, body, http.StatusBadRequest, api.CodeInvalid)
		require.Equal(t, "run_at", e.Field)
		require.Contains(t, e.Message, "0001–9999")
	}
	conn := f.dialWS(t, "")
	for i, at := range outOfRangeTimes {
		res := conn.call(t, int64(i+1), "submit_task", `{"goal":"later","run_at":"`+at+`"}`)
		require.NotNil(t, res.Error)
		require.Equal(t, "run_at", res.Error.Field)
	}
	require.Equal(t, before, snapshot(t, db), "a refused time writes nothing")

	// At the edges of the range it is stored and read back.
	for _, at := range []string{"9999-12-31T23:59:59Z", "0001-01-01T00:00:01Z", "9999-12-31T23:59:59+01:00"} {
		task := f.submit(`{"goal":"edge","run_at":"` + at + `"}`)
		want, err := time.Parse(time.RFC3339, at)
		require.NoError(t, err)
		require.True(t, want.Equal(*task.RunAt), at)
	}
}

// A row an older version wrote with a time outside the range (run_at in the
// year 10000) still reads, lists, cancels and exports.
func TestARowWithAnUnwritableTimeDoesNotPoisonReads(t *testing.T) {
	f := newFixture(t, nil)
	good := f.submit(`{"goal":"good"}`)
	bad := f.submit(`{"goal":"bad"}`)
	year10000 := time.Date(10000, 1, 1, 23, 58, 59, 0, time.UTC).UnixMicro()
	_, err := openRaw(t, f.dbPath).Exec(`UPDATE tasks SET run_at = ?, created_at = ? WHERE id = ?`, year10000, -year10000, bad.ID)
	require.NoError(t, err)

	res, body := f.do("GET", "/api/tasks", "")
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	var list api.TaskList
	require.NoError(t, json.Unmarshal(body, &list))
	require.Len(t, list.Tasks, 2)

	res, body = f.do("GET", "/api/tasks/"+bad.ID, "")
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	var task api.Task
	require.NoError(t, json.Unmarshal(body, &task))
	require.Equal(t, "9999-12-31T23:59:59.999999Z", task.RunAt.Format(time.RFC3339Nano), "read as the nearest time the API can write")
	require.Equal(t, "0001-01-01T00:00:00Z", task.CreatedAt.Format(time.RFC3339Nano))

	conn := f.dialWS(t, "")
	ws := conn.call(t, 1, "list_tasks", `{}`)
	require.Nil(t, ws.Error)
	require.Contains(t, string(ws.Result), bad.ID)

	res, body = f.do("DELETE", "/api/tasks/"+bad.ID, "")
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))

	var dump strings.Builder
	require.NoError(t, f.client.Export(t.Context(), &dump, time.Time{}))
	require.Contains(t, dump.String(), bad.ID)
	require.Contains(t, dump.String(), good.ID)
}

func TestQueryStringsThatDoNotParseAreRefused(t *testing.T) {
	f := newFixture(t, nil)
	f.submit(`{"goal":"mine","agent":"default"}`)
	for _, c := range []struct{ path, field string }{
		{"/api/tasks?agent=nobody;x", "agent"},
		{"/api/tasks?status=pending&agent=nobody;x", "agent"},
		{"/api/inbox?session=alice;x", "session"},
		{"/api/tasks?agent=%zz", "agent"},
		{"/api/tasks?session=%ff%fe", "session"},
		{"/api/tasks?q=%ff", "q"},
		{"/api/inputs?status=pending;", "status"},
		{"/api/tasks/ready?limit=5;6", "limit"},
		{"/api/events?after=0;1", "after"},
	} {
		res, body := f.do("GET", c.path, "")
		e := requireError(t, res, body, http.StatusBadRequest, api.CodeBadRequest)
		require.Equal(t, c.field, e.Field, c.path)
	}
	// A ";" written as %3B is a value like any other.
	res, body := f.do("GET", "/api/tasks?agent=nobody%3Bx", "")
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	require.JSONEq(t, `{"tasks":[],"next_cursor":""}`, string(body))

	// q finds text in titles and goals, literally.
	res, body = f.do("GET", "/api/tasks?q=MIN", "")
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	require.Contains(t, string(body), `"goal":"mine"`)
	res, body = f.do("GET", "/api/tasks?q=m%25", "")
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	require.JSONEq(t, `{"tasks":[],"next_cursor":""}`, string(body))
	res, body = f.do("GET", "/api/tasks?q=a%00b", "")
	e := requireError(t, res, body, http.StatusBadRequest, api.CodeInvalid)
	require.Equal(t, "text", e.Field)
}

func TestListingTheInboxChangesNothingAndAckMarksRead(t *testing.T) {
	f := newFixture(t, nil)
	var tasks []*api.Task
	for _, session := range []string{"alice", "alice", "bob"} {
		task := f.submit(`{"goal":"g","session_id":"` + session + `"}`)
		res, body := f.do("DELETE", "/api/tasks/"+task.ID, "")
		require.Equal(t, http.StatusOK, res.StatusCode, string(body))
		tasks = append(tasks, task)
	}
	inbox := func(query string) []*api.Notification {
		t.Helper()
		res, body := f.do("GET", "/api/inbox"+query, "")
		require.Equal(t, http.StatusOK, res.StatusCode, string(body))
		var list api.NotificationList
		require.NoError(t, json.Unmarshal(body, &list))
		return list.Notifications
	}
	db := openRaw(t, f.dbPath)
	before := snapshot(t, db)
	first := inbox("?session=alice")
	require.Len(t, first, 2)
	require.Equal(t, first, inbox("?session=alice"), "a second read sees the same")
	require.Len(t, inbox(""), 3)
	require.Equal(t, before, snapshot(t, db), "listing wrote nothing")
	require.True(t, strings.HasPrefix(first[0].ID, "ntf_"), first[0].ID)
	require.Equal(t, tasks[0].ID, first[0].TaskID)

	ack := func(body string) (int, api.AckResult, []byte) {
		t.Helper()
		res, b := f.do("POST", "/api/inbox/ack", body)
		var out api.AckResult
		if res.StatusCode == http.StatusOK {
			require.NoError(t, json.Unmarshal(b, &out))
		}
		return res.StatusCode, out, b
	}
	for _, c := range []struct {
		body, field string
		status      int
	}{
		{`{}`, "ids", 400},
		{`{"ids":[1]}`, "ids", 400},
		{`{"ids":["42"]}`, "ids", 400},
		{`{"ids":["ntf_x"]}`, "ids", 400},
		{`{"up_to":"tsk_1"}`, "up_to", 400},
		{`{"ids":["` + first[0].ID + `"],"up_to":"` + first[0].ID + `"}`, "up_to", 400},
		{`{"ids":["` + first[0].ID + `","ntf_424242"]}`, "ids", 422},
	} {
		status, _, body := ack(c.body)
		res := &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/json"}}}
		code := api.CodeInvalid
		if c.body == `{"ids":[1]}` {
			code = api.CodeBadRequest
		}
		e := requireError(t, res, body, c.status, code)
		require.Equal(t, c.field, e.Field, c.body)
	}
	require.Equal(t, before, snapshot(t, db), "a refused ack marks nothing")

	status, out, body := ack(`{"ids":["` + first[0].ID + `"]}`)
	require.Equal(t, http.StatusOK, status, string(body))
	require.Equal(t, 1, out.Acked)
	left := inbox("?session=alice")
	require.Len(t, left, 1)
	require.Equal(t, first[1].ID, left[0].ID)
	_, out, _ = ack(`{"ids":["` + first[0].ID + `"]}`)
	require.Equal(t, 0, out.Acked, "acking again is harmless")

	// up_to within a session leaves the other session's unread.
	all := inbox("")
	_, out, _ = ack(`{"up_to":"` + all[len(all)-1].ID + `","session_id":"alice"}`)
	require.Equal(t, 1, out.Acked)
	require.Empty(t, inbox("?session=alice"))
	require.Len(t, inbox("?session=bob"), 1)
	read := inbox("?session=alice&all=true")
	require.Len(t, read, 2)
	require.NotNil(t, read[0].ReadAt)
}

func TestWebSocketRepliesCarryTheRequestID(t *testing.T) {
	f := newFixture(t, nil)
	conn := f.dialWS(t, "")
	for i, frame := range []string{
		`{"type":"req","id":%d,"method":"check_task","params":{"task_id":"x"},"colour":"red"}`,
		`{"type":"req","id":%d,"Method":"check_task"}`,
		`{"type":"req","id":%d,"method":"submit_task","params":{"goal":"x","colour":"red"}}`,
		`{"type":"req","id":%d,"method":"submit_task","params":{"goal":"x"}} trailing`,
		`{"type":"reply","id":%d}`,
		`{"type":"req","id":%d,"method":"list_tasks","params":{"limit":"ten"}}`,
		`{"type":"req","id":%d,"method":"submit_task","params":{"goal":"x","run_at":"9999-12-31T23:59:59-23:59"}}`,
	} {
		id := int64(100 + i)
		conn.send(t, strings.Replace(frame, "%d", strconv.FormatInt(id, 10), 1))
		res := conn.next(t)
		require.NotNil(t, res.ID, frame)
		require.Equal(t, id, *res.ID, frame)
		require.NotNil(t, res.Error, "exactly one of result and error: %s", frame)
		require.Nil(t, res.Result, frame)
		require.NotEqual(t, api.CodeInternal, res.Error.Code, frame)
	}
	// A frame with no id gets a reply with no id, and an error.
	conn.send(t, `{"type":"req","method":"check_task"`)
	res := conn.next(t)
	require.Nil(t, res.ID)
	require.NotNil(t, res.Error)

	ok := conn.call(t, 1, "list_tasks", `{}`)
	require.Nil(t, ok.Error)
	require.NotNil(t, ok.Result)
}

func TestResumingPastTheJournalsEndIsRefused(t *testing.T) {
	f := newFixture(t, nil)
	task := f.submit(`{"goal":"one event"}`)
	last, err := f.client.LastEventID(t.Context())
	require.NoError(t, err)
	past := strconv.FormatInt(last+1, 10)
	for _, path := range []string{"/api/events?after=" + past, "/api/tasks/" + task.ID + "/events?after=" + past} {
		res, body := f.do("GET", path, "")
		e := requireError(t, res, body, http.StatusBadRequest, api.CodeBadRequest)
		require.Equal(t, "after", e.Field)
	}
	req, err := http.NewRequestWithContext(t.Context(), "GET", f.http.URL+"/api/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Last-Event-ID", past)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusBadRequest, res.StatusCode)

	_, resp, err := websocket.Dial(t.Context(), f.wsURL("&after="+past), nil)
	require.Error(t, err)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)

	// The last id itself is fine: the stream waits for the next event.
	events, _ := f.openStream(t.Context(), "/api/events?after="+strconv.FormatInt(last, 10), "")
	f.submit(`{"goal":"next"}`)
	require.Equal(t, last+1, waitFor(t, events, "task.created").id)
}

func TestBodiesMustBeValidUTF8(t *testing.T) {
	f := newFixture(t, nil)
	db := openRaw(t, f.dbPath)
	before := snapshot(t, db)
	for _, c := range []struct{ body, field string }{
		{"{\"goal\":\"bad \xff byte\"}", "goal"},
		{"{\"goal\":\"x\",\"title\":\"\xc3\"}", "title"},
		{"{\"goal\":\"x\",\"input\":{\"a\":[1,\"ok\",\"\xfe\"]}}", "input.a[2]"},
		{"{\"goal\":\"x\",\"tags\":[\"fine\",\"\xed\xa0\x80\"]}", "tags[1]"},
		{`{"goal":"lone \ud800 surrogate"}`, "goal"},
		{`{"goal":"x","metadata":{"k":"\udc00"}}`, "metadata.k"},
		{"{\"goal\":\"x\",\"input\":{\"\xff\":1}}", "input"},
	} {
		res, body := f.do("POST", "/api/tasks", c.body)
		e := requireError(t, res, body, http.StatusBadRequest, api.CodeBadRequest)
		require.Equal(t, c.field, e.Field, c.body)
		require.Contains(t, e.Message, "UTF-8")
	}
	require.Equal(t, before, snapshot(t, db))
	// A surrogate pair is one valid character.
	task := f.submit(`{"goal":"smile \ud83d\ude00"}`)
	require.Equal(t, "smile 😀", task.Goal)
}

func TestControlCharactersInGoalAndTitleAreRefused(t *testing.T) {
	f := newFixture(t, nil)
	db := openRaw(t, f.dbPath)
	before := snapshot(t, db)
	for _, c := range []struct{ body, field string }{
		{`{"goal":"nul\u0000here"}`, "goal"},
		{`{"goal":"bell\u0007"}`, "goal"},
		{`{"goal":"escape \u001b[31mred"}`, "goal"},
		{`{"goal":"carriage\rreturn"}`, "goal"},
		{`{"goal":"del\u007f"}`, "goal"},
		{`{"goal":"c1\u0085"}`, "goal"},
		{`{"goal":"ok","title":"tab\tok but nul\u0000"}`, "title"},
	} {
		res, body := f.do("POST", "/api/tasks", c.body)
		e := requireError(t, res, body, http.StatusBadRequest, api.CodeInvalid)
		require.Equal(t, c.field, e.Field, c.body)
	}
	require.Equal(t, before, snapshot(t, db))
	task := f.submit(`{"goal":"tab\there\nand a newline","title":"a\ttitle"}`)
	require.Equal(t, "tab\there\nand a newline", task.Goal)
}

// A client that closes its socket while a request is in flight is not a
// server fault: nothing is logged at ERROR (the fixture fails the test if
// it is).
func TestWebSocketClientLeavingIsNotAnError(t *testing.T) {
	f := newFixture(t, nil)
	for i := range 20 {
		conn := f.dialWS(t, "")
		conn.send(t, `{"type":"req","id":1,"method":"list_tasks","params":{}}`)
		conn.send(t, `{"type":"req","id":2,"method":"submit_task","params":{"goal":"g`+strconv.Itoa(i)+`"}}`)
		if i%2 == 0 {
			conn.conn.Close(websocket.StatusNormalClosure, "bye")
		} else {
			conn.conn.CloseNow()
		}
	}
	// A last full round trip: the server is still well.
	require.Nil(t, f.dialWS(t, "").call(t, 1, "list_tasks", `{}`).Error)

	// The request a closing connection leaves behind fails on its
	// cancelled context, deterministically here.
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	ws := &wsSession{s: f.server}
	for _, method := range []string{"list_tasks", "check_task", "submit_task"} {
		res := ws.handle(gone, []byte(`{"type":"req","id":9,"method":"`+method+`","params":{"task_id":"`+unknownID+`","goal":"g"}}`))
		require.NotNil(t, res.Error, method)
		require.NotEqual(t, api.CodeInternal, res.Error.Code, method)
	}
}

type wsClient struct {
	conn *websocket.Conn
	ctx  context.Context
}

func (f *fixture) wsURL(extra string) string {
	return "ws" + strings.TrimPrefix(f.http.URL, "http") + "/api/ws?token=" + testToken + extra
}

func (f *fixture) dialWS(t *testing.T, extra string) *wsClient {
	t.Helper()
	conn, _, err := websocket.Dial(t.Context(), f.wsURL(extra), nil)
	require.NoError(t, err)
	t.Cleanup(func() { conn.CloseNow() })
	return &wsClient{conn: conn, ctx: t.Context()}
}

func (c *wsClient) send(t *testing.T, frame string) {
	t.Helper()
	require.NoError(t, c.conn.Write(c.ctx, websocket.MessageText, []byte(frame)))
}

// next returns the next reply, skipping pushed events.
func (c *wsClient) next(t *testing.T) api.Frame {
	t.Helper()
	for {
		_, b, err := c.conn.Read(c.ctx)
		require.NoError(t, err)
		var fr api.Frame
		require.NoError(t, json.Unmarshal(b, &fr), string(b))
		if fr.Type == "res" {
			return fr
		}
	}
}

func (c *wsClient) call(t *testing.T, id int64, method, params string) api.Frame {
	t.Helper()
	c.send(t, `{"type":"req","id":`+strconv.FormatInt(id, 10)+`,"method":"`+method+`","params":`+params+`}`)
	res := c.next(t)
	require.NotNil(t, res.ID)
	require.Equal(t, id, *res.ID)
	return res
}
