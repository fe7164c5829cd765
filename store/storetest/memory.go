package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

// newMemoryID returns a fresh memory id; ids sort in creation order.
func newMemoryID() string {
	return fmt.Sprintf("mem_%012d", idCounter.Add(1))
}

// remember writes one memory, filling what p leaves empty, and requires
// that it was inserted.
func (b *testBundle) remember(t *testing.T, p store.MemoryInsertParams) *store.Memory {
	t.Helper()
	if p.ID == "" {
		p.ID = newMemoryID()
	}
	if p.Source == "" {
		p.Source = store.SourceUser
	}
	if p.Actor == "" {
		p.Actor = store.ActorUser
	}
	if p.Now == nil {
		p.Now = at(0)
	}
	res, err := b.store.MemoryInsert(b.ctx, &p)
	require.NoError(t, err)
	require.True(t, res.Inserted)
	require.Equal(t, p.ID, res.Memory.ID)
	return res.Memory
}

func (b *testBundle) memories(t *testing.T, p store.MemoryListParams) []*store.Memory {
	t.Helper()
	if p.Limit == 0 {
		p.Limit = 1000
	}
	ms, err := b.store.MemoryList(b.ctx, &p)
	require.NoError(t, err)
	return ms
}

func (b *testBundle) search(t *testing.T, p store.MemorySearchParams) []string {
	t.Helper()
	if p.Limit == 0 {
		p.Limit = 100
	}
	ms, err := b.store.MemorySearch(b.ctx, &p)
	require.NoError(t, err, "query %q", p.Query)
	return memoryIDs(ms)
}

func memoryIDs(ms []*store.Memory) []string {
	ids := make([]string, 0, len(ms))
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	return ids
}

func testMemory(t *testing.T, newDatabase NewDatabaseFunc) {
	t.Run("InsertAndGet", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{Agent: "researcher"})
		m := b.remember(t, store.MemoryInsertParams{Text: "The staging database is on port 5433", Tags: []string{"ops", "db"},
			TaskID: task.ID, Agent: "researcher", Source: store.SourceSchedule, Actor: store.AgentActor(task.ID), Now: at(time.Minute)})
		require.Equal(t, "The staging database is on port 5433", m.Text)
		require.Equal(t, []string{"ops", "db"}, m.Tags)
		require.Equal(t, task.ID, m.TaskID)
		require.Equal(t, "researcher", m.Agent)
		require.Equal(t, store.SourceSchedule, m.Source)
		require.Equal(t, store.EstimateTokens(m.Text, m.Tags), m.EstimatedTokens)
		require.Equal(t, 15, m.EstimatedTokens, "36 bytes of text and 7 of tags, 3 bytes a token, rounded up")
		requireTime(t, base.Add(time.Minute), m.CreatedAt, "created_at")

		got, err := b.store.MemoryGetByID(b.ctx, m.ID)
		require.NoError(t, err)
		require.Equal(t, m, got)
		_, err = b.store.MemoryGetByID(b.ctx, "mem_unknown")
		require.ErrorIs(t, err, store.ErrNotFound)

		ev := b.lastEvent(t, task.ID)
		require.Equal(t, store.EventMemoryCreated, ev.Type)
		require.Equal(t, store.AgentActor(task.ID), ev.Actor)
		require.JSONEq(t, `{"memory_id":"`+m.ID+`","source":"schedule","estimated_tokens":15}`, string(ev.Data))

		// Without a task and without tags.
		loose := b.remember(t, store.MemoryInsertParams{Text: "x"})
		require.Equal(t, []string{}, loose.Tags)
		require.Empty(t, loose.TaskID)
		require.Equal(t, 1, loose.EstimatedTokens)
	})

	t.Run("IdempotencyKey", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{})
		first := b.remember(t, store.MemoryInsertParams{Text: "once", TaskID: task.ID, IdempotencyKey: task.ID + ":2:1"})
		require.Equal(t, task.ID+":2:1", first.IdempotencyKey)
		res, err := b.store.MemoryInsert(b.ctx, &store.MemoryInsertParams{ID: newMemoryID(), Text: "twice", TaskID: task.ID,
			Source: store.SourceUser, IdempotencyKey: task.ID + ":2:1", Now: at(time.Minute)})
		require.NoError(t, err)
		require.False(t, res.Inserted)
		require.Equal(t, first, res.Memory)
		require.Len(t, b.memories(t, store.MemoryListParams{}), 1)
		b.requireEventTypes(t, task.ID, store.EventTaskCreated, store.EventMemoryCreated)
	})

	t.Run("LeaseFence", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{})
		claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{})
		b.remember(t, store.MemoryInsertParams{Text: "under the lease", TaskID: task.ID, Lease: leaseOf(claimed)})

		stale := leaseOf(claimed)
		stale.Token++
		_, err := b.store.MemoryInsert(b.ctx, &store.MemoryInsertParams{ID: newMemoryID(), Text: "stale", TaskID: task.ID,
			Source: store.SourceUser, Lease: stale, Now: at(0)})
		require.ErrorIs(t, err, store.ErrLeaseLost)

		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claimed), Status: store.StatusCompleted}))
		_, err = b.store.MemoryInsert(b.ctx, &store.MemoryInsertParams{ID: newMemoryID(), Text: "after the end", TaskID: task.ID,
			Source: store.SourceUser, Lease: leaseOf(claimed), Now: at(0)})
		require.ErrorIs(t, err, store.ErrLeaseLost, "a finished task's lease fences nothing in")
		require.Len(t, b.memories(t, store.MemoryListParams{}), 1)
	})

	t.Run("List", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		t1, t2 := b.insert(t, store.TaskInsertParams{}), b.insert(t, store.TaskInsertParams{})
		m1 := b.remember(t, store.MemoryInsertParams{Text: "one", TaskID: t1.ID, Agent: "a", Source: store.SourceAgent, Now: at(0)})
		m2 := b.remember(t, store.MemoryInsertParams{Text: "two", TaskID: t2.ID, Agent: "b", Source: store.SourceHeartbeat, Now: at(time.Minute)})
		m3 := b.remember(t, store.MemoryInsertParams{Text: "three", TaskID: t1.ID, Agent: "b", Source: store.SourceAgent, Now: at(2 * time.Minute)})

		require.Equal(t, []string{m3.ID, m2.ID, m1.ID}, memoryIDs(b.memories(t, store.MemoryListParams{})))
		require.Equal(t, []string{m3.ID, m1.ID}, memoryIDs(b.memories(t, store.MemoryListParams{TaskID: t1.ID})))
		require.Equal(t, []string{m3.ID, m2.ID}, memoryIDs(b.memories(t, store.MemoryListParams{Agent: "b"})))
		require.Equal(t, []string{m2.ID}, memoryIDs(b.memories(t, store.MemoryListParams{Source: store.SourceHeartbeat})))
		require.Equal(t, []string{m3.ID}, memoryIDs(b.memories(t, store.MemoryListParams{Agent: "b", Source: store.SourceAgent})))
		require.Equal(t, []string{m3.ID, m2.ID}, memoryIDs(b.memories(t, store.MemoryListParams{Since: base.Add(time.Minute)})))

		page := b.memories(t, store.MemoryListParams{Limit: 2})
		require.Equal(t, []string{m3.ID, m2.ID}, memoryIDs(page))
		require.Equal(t, []string{m1.ID}, memoryIDs(b.memories(t, store.MemoryListParams{Limit: 2, Cursor: m2.ID})))
		require.Equal(t, []string{m1.ID, m2.ID}, memoryIDs(b.memories(t, store.MemoryListParams{Limit: 2, OldestFirst: true})))
		require.Equal(t, []string{m3.ID}, memoryIDs(b.memories(t, store.MemoryListParams{Limit: 2, OldestFirst: true, Cursor: m2.ID})))
		require.Empty(t, b.memories(t, store.MemoryListParams{TaskID: "tsk_none"}))
	})

	t.Run("Search", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		both := b.remember(t, store.MemoryInsertParams{Text: "Deploys to production need the release checklist", Agent: "ops"})
		one := b.remember(t, store.MemoryInsertParams{Text: "The production database is backed up nightly", Agent: "ops"})
		tagged := b.remember(t, store.MemoryInsertParams{Text: "Ask Dana before anything", Tags: []string{"checklist"}, Agent: "pm"})
		accent := b.remember(t, store.MemoryInsertParams{Text: "Lunch at the café on Fridays", Source: store.SourceHeartbeat})
		b.remember(t, store.MemoryInsertParams{Text: "unrelated words entirely"})

		// More of the words ranks higher; tags are searched too.
		got := b.search(t, store.MemorySearchParams{Query: "production checklist"})
		require.Len(t, got, 3)
		require.Equal(t, both.ID, got[0], "the memory with both words ranks first")
		require.ElementsMatch(t, []string{one.ID, tagged.ID}, got[1:])
		require.Equal(t, []string{both.ID}, b.search(t, store.MemorySearchParams{Query: "production checklist", Limit: 1}))
		require.Equal(t, []string{tagged.ID}, b.search(t, store.MemorySearchParams{Query: "production checklist", Agent: "pm"}))
		require.Equal(t, []string{accent.ID}, b.search(t, store.MemorySearchParams{Query: "CAFE", Source: store.SourceHeartbeat}))
		require.Equal(t, []string{one.ID}, b.search(t, store.MemorySearchParams{Query: "databases"}), "words are stemmed")

		// No character means anything: what would be FTS syntax is text.
		for _, q := range []string{`"`, `"production`, `production"`, `AND`, `production AND`, `NOT production`, `NEAR(production checklist)`,
			`prod*`, `-production`, `text:production`, `^production`, `(production`, `{text}: production`, `'; DROP TABLE memories; --`,
			"production\x00checklist", `!!!`, `""""`, "\t\n"} {
			_, err := b.store.MemorySearch(b.ctx, &store.MemorySearchParams{Query: q, Limit: 10})
			require.NoError(t, err, "query %q", q)
		}
		require.Empty(t, b.search(t, store.MemorySearchParams{Query: "   "}))
		require.Empty(t, b.search(t, store.MemorySearchParams{Query: "!!! ---"}))
		require.Contains(t, b.search(t, store.MemorySearchParams{Query: `"production"`}), one.ID, "quotes are not syntax")
		require.Contains(t, b.search(t, store.MemorySearchParams{Query: `AND production`}), one.ID, "AND is a word")

		// A removed memory is not found.
		require.NoError(t, b.store.MemoryDelete(b.ctx, &store.MemoryDeleteParams{ID: one.ID, Actor: store.ActorUser}))
		require.Equal(t, []string{both.ID}, b.search(t, store.MemorySearchParams{Query: "production"}))
	})

	t.Run("Delete", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{})
		m := b.remember(t, store.MemoryInsertParams{Text: "gone soon", TaskID: task.ID})
		require.NoError(t, b.store.MemoryDelete(b.ctx, &store.MemoryDeleteParams{ID: m.ID, Actor: store.ActorUser, Now: at(time.Minute)}))
		_, err := b.store.MemoryGetByID(b.ctx, m.ID)
		require.ErrorIs(t, err, store.ErrNotFound)
		ev := b.lastEvent(t, task.ID)
		require.Equal(t, store.EventMemoryDeleted, ev.Type)
		require.Equal(t, store.ActorUser, ev.Actor)
		require.JSONEq(t, `{"memory_id":"`+m.ID+`","source":"user"}`, string(ev.Data))

		err = b.store.MemoryDelete(b.ctx, &store.MemoryDeleteParams{ID: m.ID, Actor: store.ActorUser})
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("PurgeByTaskRemovesExactlyItsMemories", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		t1, t2 := b.insert(t, store.TaskInsertParams{}), b.insert(t, store.TaskInsertParams{})
		b.remember(t, store.MemoryInsertParams{Text: "t1 first note", TaskID: t1.ID, Agent: "a"})
		b.remember(t, store.MemoryInsertParams{Text: "t1 second note", TaskID: t1.ID, Agent: "a"})
		kept := []*store.Memory{
			b.remember(t, store.MemoryInsertParams{Text: "t2 note", TaskID: t2.ID, Agent: "a"}),
			b.remember(t, store.MemoryInsertParams{Text: "loose note", Agent: "a"}),
		}

		n, err := b.store.MemoryPurge(b.ctx, &store.MemoryPurgeParams{TaskID: t1.ID, Actor: store.ActorUser, Now: at(time.Minute)})
		require.NoError(t, err)
		require.Equal(t, int64(2), n)
		require.Empty(t, b.memories(t, store.MemoryListParams{TaskID: t1.ID}))
		require.Equal(t, []string{kept[1].ID, kept[0].ID}, memoryIDs(b.memories(t, store.MemoryListParams{})))
		require.Empty(t, b.search(t, store.MemorySearchParams{Query: "first second"}), "the index forgets them too")

		ev := b.lastEvent(t, t1.ID)
		require.Equal(t, store.EventMemoryPurged, ev.Type)
		require.Equal(t, store.ActorUser, ev.Actor)
		require.JSONEq(t, `{"task_id":"`+t1.ID+`","count":2}`, string(ev.Data))

		// Nothing left to purge: no event.
		before := len(b.allEvents(t))
		n, err = b.store.MemoryPurge(b.ctx, &store.MemoryPurgeParams{TaskID: t1.ID, Actor: store.ActorUser})
		require.NoError(t, err)
		require.Zero(t, n)
		require.Len(t, b.allEvents(t), before)

		_, err = b.store.MemoryPurge(b.ctx, &store.MemoryPurgeParams{Actor: store.ActorUser})
		require.ErrorIs(t, err, store.ErrMemoryPurgeAll)
		require.Len(t, b.memories(t, store.MemoryListParams{}), 2)
	})

	t.Run("PurgeByAgentSourceAndAge", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		b.remember(t, store.MemoryInsertParams{Text: "a old", Agent: "a", Now: at(0)})
		aNew := b.remember(t, store.MemoryInsertParams{Text: "a new", Agent: "a", Now: at(time.Hour)})
		scout := b.remember(t, store.MemoryInsertParams{Text: "scout", Agent: "s", Source: store.SourceHeartbeat, Now: at(0)})
		other := b.remember(t, store.MemoryInsertParams{Text: "other", Agent: "b", Now: at(time.Hour)})

		n, err := b.store.MemoryPurge(b.ctx, &store.MemoryPurgeParams{Agent: "a", CreatedBefore: base.Add(time.Hour), Actor: store.ActorSystem})
		require.NoError(t, err)
		require.Equal(t, int64(1), n, "created before is strict")
		n, err = b.store.MemoryPurge(b.ctx, &store.MemoryPurgeParams{Source: store.SourceHeartbeat, Actor: store.ActorUser})
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		require.Equal(t, []string{other.ID, aNew.ID}, memoryIDs(b.memories(t, store.MemoryListParams{})))
		_, err = b.store.MemoryGetByID(b.ctx, scout.ID)
		require.ErrorIs(t, err, store.ErrNotFound)

		purged := b.eventList(t, store.EventListParams{Types: []string{store.EventMemoryPurged}})
		require.Len(t, purged, 2)
		require.Empty(t, purged[0].TaskID)
		require.JSONEq(t, `{"agent":"a","created_before":"2026-01-02T04:04:05Z","count":1}`, string(purged[0].Data))
		require.JSONEq(t, `{"source":"heartbeat","count":1}`, string(purged[1].Data))
	})

	t.Run("FinishWritesMemoriesOnlyWhenCompleted", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		done := b.insert(t, store.TaskInsertParams{Agent: "w"})
		failed := b.insert(t, store.TaskInsertParams{Agent: "w"})
		claimed := b.claim(t, store.TaskLeaseManyParams{Limit: 2})
		require.Len(t, claimed, 2)
		memo := func(task *store.Task) []*store.MemoryInsertParams {
			return []*store.MemoryInsertParams{{ID: newMemoryID(), Text: "result of " + task.ID, Tags: []string{"route"},
				TaskID: task.ID, Agent: "w", Source: store.SourceUser, Actor: store.AgentActor(task.ID)}}
		}
		byID := map[string]*store.Task{claimed[0].ID: claimed[0], claimed[1].ID: claimed[1]}
		donep := store.TaskFinishParams{Lease: leaseOf(byID[done.ID]), Status: store.StatusCompleted,
			Result: json.RawMessage(`{"output":"x"}`), Memories: memo(done), Now: at(time.Minute)}
		require.NoError(t, b.finish(t, donep))
		require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(byID[failed.ID]), Status: store.StatusFailed,
			Error: &store.TaskError{Code: "x", Message: "y"}, Memories: memo(failed), Now: at(time.Minute)}))

		got := b.memories(t, store.MemoryListParams{})
		require.Len(t, got, 1)
		require.Equal(t, done.ID, got[0].TaskID)
		require.Equal(t, "result of "+done.ID, got[0].Text)
		requireTime(t, base.Add(time.Minute), got[0].CreatedAt, "created_at")
		b.requireEventTypes(t, done.ID, store.EventTaskCreated, store.EventTaskStarted, store.EventTaskCompleted, store.EventMemoryCreated)

		// A retried finish writes nothing again.
		donep.Memories = memo(done)
		require.NoError(t, b.finish(t, donep))
		require.Len(t, b.memories(t, store.MemoryListParams{}), 1)
	})

	t.Run("TaskPurgeKeepsMemories", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{})
		m := b.remember(t, store.MemoryInsertParams{Text: "outlives its task", TaskID: task.ID})
		b.claimAndFinish(t, task, store.StatusCompleted)
		res, err := b.store.TaskPurge(b.ctx, &store.TaskPurgeParams{FinishedBefore: base.Add(time.Hour), Limit: 10})
		require.NoError(t, err)
		require.Equal(t, []string{task.ID}, res.TaskIDs)
		got, err := b.store.MemoryGetByID(b.ctx, m.ID)
		require.NoError(t, err)
		require.Equal(t, m, got)
		require.Equal(t, []string{m.ID}, b.search(t, store.MemorySearchParams{Query: "outlives"}))
	})

	t.Run("Import", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		task := b.insert(t, store.TaskInsertParams{})
		want := []*store.Memory{
			b.remember(t, store.MemoryInsertParams{Text: "kept with its key", Tags: []string{"k"}, TaskID: task.ID, Agent: "a",
				Source: store.SourceEvent, IdempotencyKey: "key-1", Now: at(time.Minute)}),
			b.remember(t, store.MemoryInsertParams{Text: "plain", Now: at(2 * time.Minute)}),
		}
		exported := b.memories(t, store.MemoryListParams{OldestFirst: true})
		require.Equal(t, want, exported)

		fresh := newBundle(t, newDatabase)
		require.NoError(t, fresh.store.BatchImport(fresh.ctx, &store.Batch{Memories: exported}))
		require.Equal(t, want, fresh.memories(t, store.MemoryListParams{OldestFirst: true}), "ids, times and tokens are kept")
		require.Equal(t, []string{want[0].ID}, fresh.search(t, store.MemorySearchParams{Query: "key"}), "imported memories are searchable")
		require.Empty(t, fresh.allEvents(t), "an import writes no event of its own")
		res, err := fresh.store.MemoryInsert(fresh.ctx, &store.MemoryInsertParams{ID: newMemoryID(), Text: "again",
			Source: store.SourceUser, IdempotencyKey: "key-1"})
		require.NoError(t, err)
		require.False(t, res.Inserted, "the idempotency key came along")

		err = fresh.store.BatchImport(fresh.ctx, &store.Batch{Memories: exported[:1]})
		require.ErrorIs(t, err, store.ErrConflict)
		require.Len(t, fresh.memories(t, store.MemoryListParams{}), 2)
	})
}

// RequireCategorisedByMigration requires what the migration that brought
// memory categories gives the memories written before it, which a
// driver's migration test inserted as mem_1 (key tsk_1:result), mem_2
// (key tsk_1:2:1) and mem_3 (no key): a task's result is a task_result,
// any other a fact, and none has a subject, flag, refresh or vector.
func RequireCategorisedByMigration(t *testing.T, s store.Store) {
	t.Helper()
	for id, want := range map[string]string{"mem_1": store.CategoryTaskResult, "mem_2": store.CategoryFact, "mem_3": store.CategoryFact} {
		m, err := s.MemoryGetByID(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, want, m.Category, id)
		require.Empty(t, m.Subject)
		require.Nil(t, m.Flagged)
		require.Nil(t, m.RefreshedAt)
		require.False(t, m.HasEmbedding)
	}
}
