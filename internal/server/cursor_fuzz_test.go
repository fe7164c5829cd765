package server

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/id"
)

// FuzzListCursor sends arbitrary cursors to the task list. A cursor is the
// unpadded base64url of a task id: one that decodes to an id lists the
// tasks below it, as the canonical encoding of that id does, and its
// next_cursor goes on from there; anything else is a validation error of
// the field cursor, a 400 over HTTP and never a 500.
func FuzzListCursor(f *testing.F) {
	b := newFuzzBundle(f)
	all, err := b.client.List(f.Context(), &errand.ListParams{Limit: 1000})
	require.NoError(f, err)
	for _, task := range all.Tasks {
		c := base64.RawURLEncoding.EncodeToString([]byte(task.ID))
		f.Add(c, uint8(1))
		f.Add(c[:len(c)-1]+"B", uint8(2)) // unused bits set: the same id
		f.Add(c+"==", uint8(1))
		f.Add(c[:8]+"\r\n"+c[8:], uint8(1)) // the decoder skips newlines
		f.Add(base64.StdEncoding.EncodeToString([]byte(task.ID)), uint8(1))
		f.Add(base64.RawURLEncoding.EncodeToString([]byte(strings.ToLower(task.ID))), uint8(1))
		f.Add(task.ID, uint8(1))
	}
	for _, s := range []string{
		"", "abc", "%%%", "'; DROP TABLE tasks;--", "\x00", "\xff\xfe", strings.Repeat("A", 5000),
		base64.RawURLEncoding.EncodeToString([]byte("tsk_")), base64.RawURLEncoding.EncodeToString([]byte(unknownID)),
		base64.RawURLEncoding.EncodeToString([]byte("tsk_ZZZZZZZZZZZZZZZZZZZZZZZZZZ")),
		base64.RawURLEncoding.EncodeToString([]byte("tsk_00000000000000000000000000")),
		base64.RawURLEncoding.EncodeToString([]byte("tsk_7ZZZZZZZZZZZZZZZZZZZZZZZZZ")),
	} {
		f.Add(s, uint8(3))
	}

	f.Fuzz(func(t *testing.T, cursor string, limit uint8) {
		ctx := t.Context()
		n := int(limit%5) + 1
		res, err := b.client.List(ctx, &errand.ListParams{Cursor: cursor, Limit: n})
		after, decodeErr := base64.RawURLEncoding.DecodeString(cursor)
		valid := cursor == "" || decodeErr == nil && id.Valid(id.Task, string(after))

		// Over HTTP the same cursor is a 200 or a 400 naming the field.
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/api/tasks?limit="+strconv.Itoa(n)+"&cursor="+url.QueryEscape(cursor), nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		b.handler.ServeHTTP(rec, req)

		if !valid {
			var ve *errand.ValidationError
			require.True(t, errors.As(err, &ve), "cursor %q: %v", cursor, err)
			require.Equal(t, "cursor", ve.Field)
			require.Nil(t, res)
			require.Equal(t, http.StatusBadRequest, rec.Code, "cursor %q: %s", cursor, rec.Body.String())
			var e api.ErrorBody
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), rec.Body.String())
			require.Equal(t, "cursor", e.Error.Field)
			return
		}
		require.NoError(t, err, "cursor %q", cursor)
		require.Equal(t, http.StatusOK, rec.Code, "cursor %q: %s", cursor, rec.Body.String())
		var page api.TaskList
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &page))
		require.Equal(t, res.NextCursor, page.NextCursor)
		require.LessOrEqual(t, len(res.Tasks), n)
		for _, task := range res.Tasks {
			if cursor != "" {
				require.Less(t, task.ID, string(after), "a page starts below its cursor")
			}
		}

		// The canonical encoding of what the cursor names is the same cursor.
		if cursor != "" {
			same, err := b.client.List(ctx, &errand.ListParams{Cursor: base64.RawURLEncoding.EncodeToString(after), Limit: n})
			require.NoError(t, err)
			require.Equal(t, res, same)
		}

		// next_cursor names the page's last task and goes on below it.
		if res.NextCursor == "" {
			return
		}
		require.Len(t, res.Tasks, n)
		last, err := base64.RawURLEncoding.DecodeString(res.NextCursor)
		require.NoError(t, err)
		require.Equal(t, res.Tasks[n-1].ID, string(last))
		next, err := b.client.List(ctx, &errand.ListParams{Cursor: res.NextCursor, Limit: n})
		require.NoError(t, err)
		require.NotEmpty(t, next.Tasks, "a next cursor leads to more tasks")
		require.Less(t, next.Tasks[0].ID, string(last))
	})
}
