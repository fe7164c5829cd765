package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/memory"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/internal/validation"
	"github.com/errandhq/errand/store"
)

func listMemories(t *testing.T, e *Engine, p *memory.ListParams) []*store.Memory {
	t.Helper()
	page, err := e.Memories().List(context.Background(), p)
	require.NoError(t, err)
	return page.Memories
}

func remember(t *testing.T, e *Engine, p *memory.RememberParams) *store.Memory {
	t.Helper()
	m, err := e.Memories().Remember(context.Background(), p)
	require.NoError(t, err)
	return m
}

// A task with the memory route leaves its output as a memory with its
// provenance, written with the completion; a failure leaves none, and the
// inbox hears of neither.
func TestMemoryRoute(t *testing.T) {
	t.Parallel()
	b := setup(t)
	outputs := map[string]json.RawMessage{
		"text":   json.RawMessage(`"The deploy window is Tuesday 10:00"`),
		"object": json.RawMessage(`{"window": "Tuesday", "hour": 10}`),
	}
	startPool(t, b.engine, &PoolConfig{Handlers: map[string]taskrun.Handler{
		DefaultAgent: taskrun.HandlerFunc(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
			if r.Task().Goal == "fail" {
				return taskrun.Result{}, &taskrun.Error{Code: "nope", Err: context.Canceled}
			}
			return taskrun.Result{Output: outputs[r.Task().Goal]}, nil
		}),
	}})

	text := submit(t, b.engine, &SubmitParams{Goal: "text", SessionID: "s1", Tags: []string{"ops", "deploys"}, ResultRoute: store.ResultRouteMemory})
	object := submit(t, b.engine, &SubmitParams{Goal: "object", Source: "schedule:sch_01JH0000000000000000000000", ResultRoute: store.ResultRouteMemory})
	failed := submit(t, b.engine, &SubmitParams{Goal: "fail", SessionID: "s1", ResultRoute: store.ResultRouteMemory})
	waitForStatus(t, b.engine, text.ID, store.StatusCompleted)
	waitForStatus(t, b.engine, object.ID, store.StatusCompleted)
	waitForStatus(t, b.engine, failed.ID, store.StatusFailed)

	got := listMemories(t, b.engine, &memory.ListParams{TaskID: text.ID})
	require.Len(t, got, 1)
	m := got[0]
	require.Equal(t, "The deploy window is Tuesday 10:00", m.Text)
	require.Equal(t, []string{"ops", "deploys"}, m.Tags)
	require.Equal(t, DefaultAgent, m.Agent)
	require.Equal(t, store.SourceUser, m.Source)
	require.Equal(t, store.EstimateTokens(m.Text, m.Tags), m.EstimatedTokens)
	require.True(t, m.CreatedAt.Equal(testStart), "stamped with the completion")
	types := eventTypes(t, b.engine, text.ID)
	require.Equal(t, []string{store.EventTaskCompleted, store.EventMemoryCreated}, types[len(types)-2:], "one transaction, completion first")

	got = listMemories(t, b.engine, &memory.ListParams{TaskID: object.ID})
	require.Len(t, got, 1)
	require.JSONEq(t, `{"window":"Tuesday","hour":10}`, got[0].Text, "a JSON output is kept as its text")
	require.Equal(t, store.SourceSchedule, got[0].Source)

	require.Empty(t, listMemories(t, b.engine, &memory.ListParams{TaskID: failed.ID}))
	notes, err := b.engine.store.NotificationList(context.Background(), &store.NotificationListParams{SessionID: "s1", Limit: 10})
	require.NoError(t, err)
	require.Len(t, notes, 1, "the completion goes to memory, not the inbox")
	require.Equal(t, failed.ID, notes[0].TaskID, "a failure still reaches a person")
	require.Equal(t, store.EventTaskFailed, notes[0].EventType)
}

// remember writes a memory with the task's provenance once per key;
// recall answers from the whole store within the task's limits.
func TestRunRememberAndRecall(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type outcome struct {
		first, again *taskrun.MemoryView
		recalled     *taskrun.Recalled
		err          error
	}
	results := make(chan outcome, 4)
	startPool(t, b.engine, &PoolConfig{Handlers: map[string]taskrun.Handler{
		"writer": taskrun.HandlerFunc(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
			var o outcome
			spec := taskrun.MemorySpec{Text: "Invoices go out on the first Monday", Tags: []string{"billing"}, IdempotencyKey: r.Task().ID + ":1:1"}
			if o.first, o.err = r.Remember(ctx, spec); o.err == nil {
				// The same step again (a crash before its record): no new memory.
				o.again, o.err = r.Remember(ctx, spec)
			}
			results <- o
			return ok("written"), o.err
		}),
		"reader": taskrun.HandlerFunc(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
			var o outcome
			var in struct {
				Query string `json:"query"`
			}
			_ = json.Unmarshal(r.Task().Input, &in)
			o.recalled, o.err = r.Recall(ctx, in.Query, 0)
			results <- o
			return ok("read"), nil
		}),
	}})

	writer := submit(t, b.engine, &SubmitParams{Goal: "write", Agent: "writer"})
	w := recv(t, results)
	require.NoError(t, w.err)
	require.Equal(t, w.first, w.again)
	waitForStatus(t, b.engine, writer.ID, store.StatusCompleted)
	m, err := b.engine.Memories().Get(context.Background(), w.first.ID)
	require.NoError(t, err)
	require.Equal(t, writer.ID, m.TaskID)
	require.Equal(t, "writer", m.Agent)
	require.Equal(t, store.SourceUser, m.Source)
	require.Equal(t, []string{"billing"}, m.Tags)
	require.Len(t, listMemories(t, b.engine, &memory.ListParams{}), 1)
	ev := waitEvent(t, b.engine, writer.ID, store.EventMemoryCreated)
	require.Equal(t, store.AgentActor(writer.ID), ev.Actor)

	// A heartbeat recalls within 500 tokens and 5 entries; a person's task
	// within 4,000 and 25.
	for i := range 8 {
		remember(t, b.engine, &memory.RememberParams{Text: "invoice note " + strings.Repeat("x", 3*40) + string(rune('a'+i))})
	}
	query := json.RawMessage(`{"query": "invoices"}`)
	submit(t, b.engine, &SubmitParams{Goal: "read", Input: query, Agent: "reader", Source: store.SourceHeartbeat})
	r := recv(t, results)
	require.NoError(t, r.err)
	require.Len(t, r.recalled.Memories, 5)
	require.Equal(t, 500, r.recalled.MaxTokens)
	require.Equal(t, 5, r.recalled.MaxEntries)
	require.LessOrEqual(t, r.recalled.EstimatedTokens, 500)

	submit(t, b.engine, &SubmitParams{Goal: "read", Input: query, Agent: "reader"})
	r = recv(t, results)
	require.NoError(t, r.err)
	require.Len(t, r.recalled.Memories, 9, "everything fits a person's limits")
	require.Equal(t, 4000, r.recalled.MaxTokens)

	// A task's own limits win; an empty query is refused.
	submit(t, b.engine, &SubmitParams{Goal: "read", Input: query, Agent: "reader", MaxMemoryTokens: 100, MaxMemoryEntries: 3})
	r = recv(t, results)
	require.NoError(t, r.err)
	require.Len(t, r.recalled.Memories, 2, "of 45 and 15 tokens, two fit 100")
	require.Equal(t, 3, r.recalled.MaxEntries)

	submit(t, b.engine, &SubmitParams{Goal: "read", Input: json.RawMessage(`{"query": "  "}`), Agent: "reader"})
	r = recv(t, results)
	var verr *validation.Error
	require.ErrorAs(t, r.err, &verr)
	require.Equal(t, "query", verr.Field)
}

// Recall fills its token budget in rank order, passing over a memory too
// large for what is left, and stops at its entries.
func TestRecallFillsTheBudgetInRankOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	big := remember(t, b.engine, &memory.RememberParams{Text: strings.Repeat("rollback ", 100)})
	best := remember(t, b.engine, &memory.RememberParams{Text: "rollback rollback procedure"})
	small := remember(t, b.engine, &memory.RememberParams{Text: "rollback is manual, see the runbook"})
	remember(t, b.engine, &memory.RememberParams{Text: "nothing to do with it"})
	ranked, err := b.engine.store.MemorySearch(ctx, &store.MemorySearchParams{Query: "rollback", Limit: 10})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{big.ID, best.ID, small.ID}, memoryIDsOf(ranked))
	without := func(skip string) []string {
		var ids []string
		for _, m := range ranked {
			if m.ID != skip {
				ids = append(ids, m.ID)
			}
		}
		return ids
	}

	res, err := b.engine.Memories().Recall(ctx, &memory.RecallParams{Query: "rollback", Limits: &memory.Limit{MaxTokens: 60, MaxEntries: 5}})
	require.NoError(t, err)
	require.Equal(t, without(big.ID), memoryIDsOf(res.Memories), "the big one does not fit; the others do, in rank order")
	require.Equal(t, best.EstimatedTokens+small.EstimatedTokens, res.EstimatedTokens)

	res, err = b.engine.Memories().Recall(ctx, &memory.RecallParams{Query: "rollback", Limits: &memory.Limit{MaxTokens: 1000, MaxEntries: 5}})
	require.NoError(t, err)
	require.Equal(t, memoryIDsOf(ranked), memoryIDsOf(res.Memories))

	res, err = b.engine.Memories().Recall(ctx, &memory.RecallParams{Query: "rollback", Limit: 1})
	require.NoError(t, err)
	require.Equal(t, memoryIDsOf(ranked)[:1], memoryIDsOf(res.Memories), "the caller's limit narrows the entries")

	res, err = b.engine.Memories().Recall(ctx, &memory.RecallParams{Query: "rollback", Limits: &memory.Limit{}})
	require.NoError(t, err)
	require.Empty(t, res.Memories, "zero limits recall nothing")
}

func memoryIDsOf(ms []*store.Memory) []string {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids
}

// Purging by task removes exactly what that task wrote; by agent or
// source, what they wrote. The journal says who did it.
func TestPurgeMemoriesByProvenance(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	t1 := submit(t, b.engine, &SubmitParams{Goal: "one", Agent: "elsewhere"})
	t2 := submit(t, b.engine, &SubmitParams{Goal: "two", Agent: "elsewhere"})
	remember(t, b.engine, &memory.RememberParams{Text: "from one", TaskID: t1.ID, Agent: "a"})
	remember(t, b.engine, &memory.RememberParams{Text: "from one again", TaskID: t1.ID, Agent: "a"})
	fromTwo := remember(t, b.engine, &memory.RememberParams{Text: "from two", TaskID: t2.ID, Agent: "a"})
	scout := remember(t, b.engine, &memory.RememberParams{Text: "a scout's", Agent: "scout", Source: store.SourceHeartbeat})

	n, err := b.engine.Memories().Purge(ctx, &memory.PurgeParams{TaskID: t1.ID})
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	require.Equal(t, []string{scout.ID, fromTwo.ID}, memoryIDsOf(listMemories(t, b.engine, &memory.ListParams{})))
	ev := waitEvent(t, b.engine, t1.ID, store.EventMemoryPurged)
	require.Equal(t, store.ActorUser, ev.Actor)
	require.JSONEq(t, `{"task_id":"`+t1.ID+`","count":2}`, string(ev.Data))

	n, err = b.engine.Memories().Purge(ctx, &memory.PurgeParams{Source: store.SourceHeartbeat, Actor: "agent:" + t2.ID})
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	n, err = b.engine.Memories().Purge(ctx, &memory.PurgeParams{Agent: "a"})
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	require.Empty(t, listMemories(t, b.engine, &memory.ListParams{}))
}

func TestMemoryValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	tooManyTags := make([]string, memory.MaxTags+1)
	for i := range tooManyTags {
		tooManyTags[i] = string(rune('a' + i))
	}
	for _, tc := range []struct {
		name  string
		p     memory.RememberParams
		field string
	}{
		{"empty text", memory.RememberParams{Text: " \n"}, "text"},
		{"long text", memory.RememberParams{Text: strings.Repeat("x", memory.MaxTextBytes+1)}, "text"},
		{"bad UTF-8", memory.RememberParams{Text: "a\xffb"}, "text"},
		{"NUL", memory.RememberParams{Text: "a\x00b"}, "text"},
		{"too many tags", memory.RememberParams{Text: "x", Tags: tooManyTags}, "tags"},
		{"long tag", memory.RememberParams{Text: "x", Tags: []string{strings.Repeat("é", memory.MaxTagRunes+1)}}, "tags"},
		{"blank tag", memory.RememberParams{Text: "x", Tags: []string{" "}}, "tags"},
		{"control in tag", memory.RememberParams{Text: "x", Tags: []string{"a\nb"}}, "tags"},
		{"bad source", memory.RememberParams{Text: "x", Source: "person"}, "source"},
		{"bad task id", memory.RememberParams{Text: "x", TaskID: "task-1"}, "task_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.engine.Memories().Remember(ctx, &tc.p)
			var verr *validation.Error
			require.ErrorAs(t, err, &verr)
			require.Equal(t, tc.field, verr.Field, err.Error())
		})
	}
	m := remember(t, b.engine, &memory.RememberParams{Text: "tags once", Tags: []string{"a", "a", "b"}})
	require.Equal(t, []string{"a", "b"}, m.Tags, "a tag given twice is kept once")

	for _, tc := range []struct {
		name  string
		p     memory.ListParams
		field string
	}{
		{"bad limit", memory.ListParams{Limit: 1001}, "limit"},
		{"bad cursor", memory.ListParams{Cursor: "nope"}, "cursor"},
		{"search with cursor", memory.ListParams{Query: "x", Cursor: "bWVt"}, "cursor"},
		{"blank query", memory.ListParams{Query: "  "}, "q"},
		{"bad source", memory.ListParams{Source: "cron"}, "source"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.engine.Memories().List(ctx, &tc.p)
			var verr *validation.Error
			require.ErrorAs(t, err, &verr)
			require.Equal(t, tc.field, verr.Field, err.Error())
		})
	}
	for _, p := range []memory.PurgeParams{{}, {TaskID: "tsk_01JH0000000000000000000000", Agent: "a"}, {Source: "cron"}, {Agent: " "}} {
		_, err := b.engine.Memories().Purge(ctx, &p)
		require.ErrorIs(t, err, validation.ErrInvalid, "%+v", p)
	}
	_, err := b.engine.Submit(ctx, &SubmitParams{Goal: "g", MaxMemoryEntries: -1})
	var verr *validation.Error
	require.ErrorAs(t, err, &verr)
	require.Equal(t, "max_memory_entries", verr.Field)

	require.ErrorIs(t, b.engine.Memories().Delete(ctx, "nope", ""), store.ErrNotFound)
	require.ErrorIs(t, b.engine.Memories().Delete(ctx, "mem_01JH0000000000000000000000", ""), store.ErrNotFound)
	require.NoError(t, b.engine.Memories().Delete(ctx, m.ID, ""))
	_, err = b.engine.Memories().Get(ctx, m.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Len(t, listMemories(t, b.engine, &memory.ListParams{}), 0)
}

// Listing pages newest first by cursor; a search returns the best matches.
func TestListMemoriesPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var ids []string
	for _, text := range []string{"alpha", "beta gamma", "gamma", "delta"} {
		ids = append(ids, remember(t, b.engine, &memory.RememberParams{Text: text}).ID)
	}
	page, err := b.engine.Memories().List(ctx, &memory.ListParams{Limit: 3})
	require.NoError(t, err)
	require.Equal(t, []string{ids[3], ids[2], ids[1]}, memoryIDsOf(page.Memories))
	require.NotEmpty(t, page.NextCursor)
	page, err = b.engine.Memories().List(ctx, &memory.ListParams{Limit: 3, Cursor: page.NextCursor})
	require.NoError(t, err)
	require.Equal(t, []string{ids[0]}, memoryIDsOf(page.Memories))
	require.Empty(t, page.NextCursor)

	page, err = b.engine.Memories().List(ctx, &memory.ListParams{Query: "gamma"})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{ids[1], ids[2]}, memoryIDsOf(page.Memories))
	require.Empty(t, page.NextCursor)
}

// Memories outlive their tasks' retention and have their own: the job
// removes those older than MemoryRetention, and keeps them all at zero.
func TestMemoryRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.engine.cfg.MemoryRetention = time.Hour
	old := remember(t, b.engine, &memory.RememberParams{Text: "old"})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sub, err := b.engine.Subscribe(ctx, EventFilter{Types: []string{store.EventMemoryPurged}}, 0)
	require.NoError(t, err)
	defer sub.Close()
	startPool(t, b.engine, &PoolConfig{Handlers: handlers(func(context.Context, taskrun.Run) (taskrun.Result, error) {
		return ok("done"), nil
	})})
	b.clock.Advance(40 * time.Minute)
	young := remember(t, b.engine, &memory.RememberParams{Text: "young"})
	// The job runs every minute; past 60 minutes the first memory is due,
	// the second not before 100. The job's ticker may start after a
	// jump, so the clock moves a minute at a time until it has run.
	var ev *store.Event
	require.Eventually(t, func() bool {
		select {
		case ev = <-sub.Events():
			return true
		default:
		}
		if b.clock.Now().Before(testStart.Add(95 * time.Minute)) {
			b.clock.Advance(time.Minute)
		}
		return false
	}, waitTimeout, time.Millisecond, "no memory.purged event")
	require.Equal(t, store.ActorSystem, ev.Actor)
	require.Contains(t, string(ev.Data), `"count":1`)
	require.Equal(t, []string{young.ID}, memoryIDsOf(listMemories(t, b.engine, &memory.ListParams{})))
	_, err = b.engine.Memories().Get(context.Background(), old.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
}
