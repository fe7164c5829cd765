package storetest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func testPushConfig(t *testing.T, newDatabase NewDatabaseFunc) {
	put := func(t *testing.T, b *testBundle, c store.PushConfig, now time.Duration) *store.PushConfig {
		t.Helper()
		if c.URL == "" {
			c.URL = "https://hooks.example.com/" + c.ID
		}
		if c.ProtocolVersion == "" {
			c.ProtocolVersion = "1.0"
		}
		out, err := b.store.PushConfigPut(b.ctx, &store.PushConfigPutParams{Config: c, Now: at(now)})
		require.NoError(t, err)
		return out
	}
	list := func(t *testing.T, s store.Store, b *testBundle, taskID, after string, limit int) []string {
		t.Helper()
		cs, err := s.PushConfigList(b.ctx, &store.PushConfigListParams{TaskID: taskID, AfterID: after, Limit: limit})
		require.NoError(t, err)
		ids := make([]string, len(cs))
		for i, c := range cs {
			require.Equal(t, taskID, c.TaskID)
			ids[i] = c.ID
		}
		return ids
	}

	t.Run("PutGetRoundTrip", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{})
		want := store.PushConfig{
			TaskID: task.ID, ID: "cfg-1", URL: "https://hooks.example.com/a2a?x=1", Token: "tok ✓",
			AuthScheme: "Bearer", AuthCredentials: "secret", ProtocolVersion: "0.3",
		}
		got := put(t, b, want, time.Second)
		want.CreatedAt, want.UpdatedAt = base.Add(time.Second), base.Add(time.Second)
		require.Equal(t, &want, got)
		// Another handle reads the same.
		read, err := b.open().PushConfigGet(b.ctx, task.ID, "cfg-1")
		require.NoError(t, err)
		require.Equal(t, &want, read)
		// The write is journaled about the task, without the secrets.
		evs := b.events(t, task.ID)
		last := evs[len(evs)-1]
		require.Equal(t, store.EventPushConfigSet, last.Type)
		require.JSONEq(t, `{"id":"cfg-1"}`, string(last.Data))
		require.Equal(t, store.ActorSystem, last.Actor)
		require.True(t, last.CreatedAt.Equal(base.Add(time.Second)))
	})

	t.Run("PutReplacesKeepingCreatedAt", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{})
		put(t, b, store.PushConfig{TaskID: task.ID, ID: "c", URL: "https://a.example", Token: "old", AuthScheme: "Basic", AuthCredentials: "x"}, 0)
		got := put(t, b, store.PushConfig{TaskID: task.ID, ID: "c", URL: "https://b.example", ProtocolVersion: "0.3"}, time.Minute)
		require.Equal(t, "https://b.example", got.URL)
		require.Empty(t, got.Token, "every field is replaced, empty ones too")
		require.Empty(t, got.AuthScheme)
		require.Empty(t, got.AuthCredentials)
		require.Equal(t, "0.3", got.ProtocolVersion)
		require.True(t, got.CreatedAt.Equal(base), "created %v", got.CreatedAt)
		require.True(t, got.UpdatedAt.Equal(base.Add(time.Minute)), "updated %v", got.UpdatedAt)
		require.Equal(t, []string{"c"}, list(t, b.store, b, task.ID, "", 10))
		var sets int
		for _, ev := range b.events(t, task.ID) {
			if ev.Type == store.EventPushConfigSet {
				sets++
			}
		}
		require.Equal(t, 2, sets, "each write is journaled")
		_, err := b.store.PushConfigPut(b.ctx, &store.PushConfigPutParams{Config: store.PushConfig{
			TaskID: task.ID, ID: "c", URL: "https://c.example", ProtocolVersion: "1.0"}, Actor: "user"})
		require.NoError(t, err)
		evs := b.events(t, task.ID)
		require.Equal(t, "user", evs[len(evs)-1].Actor)
	})

	t.Run("UnknownTask", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		_, err := b.store.PushConfigPut(b.ctx, &store.PushConfigPutParams{Config: store.PushConfig{
			TaskID: "tsk_nope", ID: "c", URL: "https://a.example", ProtocolVersion: "1.0",
		}})
		var ref *store.ReferenceError
		require.ErrorAs(t, err, &ref)
		require.Equal(t, "task_id", ref.Field)
		require.Equal(t, "tsk_nope", ref.ID)
		require.ErrorIs(t, err, store.ErrNotFound)
		require.Empty(t, list(t, b.store, b, "tsk_nope", "", 10))
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{})
		ok := store.PushConfig{TaskID: task.ID, ID: "c", URL: "https://a.example", ProtocolVersion: "1.0"}
		for name, mutate := range map[string]func(c *store.PushConfig){
			"no task":    func(c *store.PushConfig) { c.TaskID = "" },
			"no id":      func(c *store.PushConfig) { c.ID = "" },
			"no url":     func(c *store.PushConfig) { c.URL = "" },
			"no version": func(c *store.PushConfig) { c.ProtocolVersion = "" },
			"long id":    func(c *store.PushConfig) { c.ID = strings.Repeat("x", store.MaxPushConfigIDBytes+1) },
			"long url": func(c *store.PushConfig) {
				c.URL = "https://a.example/" + strings.Repeat("x", store.MaxPushConfigURLBytes)
			},
			"long token":     func(c *store.PushConfig) { c.Token = strings.Repeat("x", store.MaxPushConfigTokenBytes+1) },
			"bad utf-8":      func(c *store.PushConfig) { c.Token = "\xff" },
			"nul byte":       func(c *store.PushConfig) { c.AuthCredentials = "a\x00b" },
			"nul in the id":  func(c *store.PushConfig) { c.ID = "\x00" },
			"long scheme":    func(c *store.PushConfig) { c.AuthScheme = strings.Repeat("x", store.MaxPushConfigIDBytes+1) },
			"long version":   func(c *store.PushConfig) { c.ProtocolVersion = strings.Repeat("1", 17) },
			"long secret":    func(c *store.PushConfig) { c.AuthCredentials = strings.Repeat("x", store.MaxPushConfigTokenBytes+1) },
			"bad utf-8 url":  func(c *store.PushConfig) { c.URL = "https://a.example/\xc3" },
			"bad utf-8 task": func(c *store.PushConfig) { c.TaskID = "tsk_\xc3" },
		} {
			c := ok
			mutate(&c)
			_, err := b.store.PushConfigPut(b.ctx, &store.PushConfigPutParams{Config: c})
			require.ErrorIs(t, err, store.ErrPushConfigInvalid, name)
		}
		require.Empty(t, list(t, b.store, b, task.ID, "", 10), "nothing was written")
		for _, ev := range b.events(t, task.ID) {
			require.NotEqual(t, store.EventPushConfigSet, ev.Type, "nor journaled")
		}
		// The limits themselves are fine.
		c := ok
		c.ID, c.Token = strings.Repeat("i", store.MaxPushConfigIDBytes), strings.Repeat("t", store.MaxPushConfigTokenBytes)
		put(t, b, c, 0)
	})

	t.Run("GetUnknown", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{})
		other := b.insert(t, store.TaskInsertParams{})
		put(t, b, store.PushConfig{TaskID: other.ID, ID: "c"}, 0)
		_, err := b.store.PushConfigGet(b.ctx, task.ID, "c")
		require.ErrorIs(t, err, store.ErrNotFound, "configs belong to their task")
		_, err = b.store.PushConfigGet(b.ctx, "tsk_nope", "c")
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("ListPagesByID", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{})
		other := b.insert(t, store.TaskInsertParams{})
		// Ids that sort differently by byte and by a locale's rules.
		for _, id := range []string{"b", "a", "B", "a-2", "Z", "a_1"} {
			put(t, b, store.PushConfig{TaskID: task.ID, ID: id}, 0)
		}
		put(t, b, store.PushConfig{TaskID: other.ID, ID: "x"}, 0)
		all := list(t, b.store, b, task.ID, "", 100)
		require.Equal(t, []string{"B", "Z", "a", "a-2", "a_1", "b"}, all, "by byte order")
		var paged []string
		for after := ""; ; {
			page := list(t, b.store, b, task.ID, after, 4)
			paged = append(paged, page...)
			if len(page) < 4 {
				break
			}
			after = page[len(page)-1]
		}
		require.Equal(t, all, paged)
		require.Equal(t, []string{"x"}, list(t, b.open(), b, other.ID, "", 100))
	})

	t.Run("DeleteIsIdempotent", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{})
		put(t, b, store.PushConfig{TaskID: task.ID, ID: "a"}, 0)
		put(t, b, store.PushConfig{TaskID: task.ID, ID: "b"}, 0)
		gone, err := b.store.PushConfigDelete(b.ctx, task.ID, "a")
		require.NoError(t, err)
		require.True(t, gone)
		gone, err = b.store.PushConfigDelete(b.ctx, task.ID, "a")
		require.NoError(t, err)
		require.False(t, gone)
		gone, err = b.store.PushConfigDelete(b.ctx, "tsk_nope", "a")
		require.NoError(t, err)
		require.False(t, gone)
		require.Equal(t, []string{"b"}, list(t, b.store, b, task.ID, "", 10))
		_, err = b.store.PushConfigGet(b.ctx, task.ID, "a")
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("PurgedWithTheTask", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		done := b.insert(t, store.TaskInsertParams{})
		open := b.insert(t, store.TaskInsertParams{RunAt: at(time.Hour)})
		put(t, b, store.PushConfig{TaskID: done.ID, ID: "c"}, 0)
		put(t, b, store.PushConfig{TaskID: open.ID, ID: "c"}, 0)
		b.claimAndFinish(t, done, store.StatusCompleted)
		res, err := b.store.TaskPurge(b.ctx, &store.TaskPurgeParams{FinishedBefore: base.Add(24 * time.Hour), Limit: 10})
		require.NoError(t, err)
		require.Equal(t, []string{done.ID}, res.TaskIDs)
		require.Empty(t, list(t, b.store, b, done.ID, "", 10))
		require.Equal(t, []string{"c"}, list(t, b.store, b, open.ID, "", 10))
	})

	t.Run("ConcurrentPuts", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{})
		stores := []store.Store{b.store, b.open()}
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				_, err := stores[i%2].PushConfigPut(b.ctx, &store.PushConfigPutParams{Config: store.PushConfig{
					TaskID: task.ID, ID: fmt.Sprintf("c%d", i%4), URL: fmt.Sprintf("https://h%d.example", i), ProtocolVersion: "1.0",
				}})
				if err != nil {
					t.Errorf("put %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		require.Equal(t, []string{"c0", "c1", "c2", "c3"}, list(t, b.store, b, task.ID, "", 10))
	})
}
