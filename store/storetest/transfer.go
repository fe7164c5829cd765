package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func testTransfer(t *testing.T, newDatabase NewDatabaseFunc) {
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		fillForExport(t, b)
		want := exportAll(t, b, b.store, time.Time{}, 2)
		require.Len(t, want.Tasks, 10)
		require.NotEmpty(t, want.Steps)
		require.Len(t, want.Inputs, 2)
		require.Len(t, want.Dependencies, 3)
		require.NotEmpty(t, want.Notifications)
		// The columns only the store reads are exported too.
		records := map[string]*store.TaskRecord{}
		for _, rec := range want.Tasks {
			records[rec.Agent] = rec
		}
		require.Equal(t, "changed my mind", records["cancelling"].CancelReason)
		require.False(t, records["cancelling"].CancelRequestedAt.IsZero())
		require.NotEmpty(t, records["cancelling"].LeaseOwner)
		require.JSONEq(t, `{"goal":"g"}`, string(records["cancelling"].Checkpoint))
		require.False(t, records["done"].BudgetWarnedAt.IsZero(), "850 of 1000 tokens")
		require.Equal(t, store.OnDependencyFailureRun, records["blocked"].OnDependencyFailure)
		require.Equal(t, store.OnDependencyFailureFail, records["done"].OnDependencyFailure)
		require.Equal(t, "inp_export_1", want.Inputs[0].ID)
		requireTime(t, base.Add(24*time.Hour), want.Inputs[0].ExpiresAt, "expires_at")
		require.Equal(t, "the default", *want.Inputs[0].DefaultAnswer)
		require.Nil(t, want.Inputs[1].DefaultAnswer)

		fresh := newBundle(t, newDatabase)
		// Import in the pieces an export streams: pages of tasks with their
		// rows, then the journal, then the inbox.
		for _, piece := range []*store.Batch{
			{Tasks: want.Tasks[:5], Steps: want.Steps, Inputs: want.Inputs[:1]},
			{Tasks: want.Tasks[5:], Inputs: want.Inputs[1:], Dependencies: want.Dependencies},
			{Events: want.Events},
			{Notifications: want.Notifications},
		} {
			require.NoError(t, fresh.store.BatchImport(fresh.ctx, piece))
		}
		got := exportAll(t, fresh, fresh.store, time.Time{}, 100)
		require.Equal(t, want, got, "every row comes back as it was")

		// The ordinary reads see the same store.
		require.Equal(t, b.listAll(t), fresh.listAll(t))
		for _, task := range want.Tasks {
			require.Equal(t, b.get(t, task.ID), fresh.get(t, task.ID))
			require.Equal(t, b.steps(t, task.ID), fresh.steps(t, task.ID))
			require.Equal(t, b.events(t, task.ID), fresh.events(t, task.ID))
		}
		counts, err := b.store.TaskCountByStatus(b.ctx)
		require.NoError(t, err)
		freshCounts, err := fresh.store.TaskCountByStatus(fresh.ctx)
		require.NoError(t, err)
		require.Equal(t, counts, freshCounts)
		tagged, err := fresh.store.TaskList(fresh.ctx, &store.TaskListParams{Tag: "export", Limit: 100})
		require.NoError(t, err)
		require.Len(t, tagged, 1, "tags are indexed again")
		for _, s := range []store.Store{b.store, fresh.store} {
			pending, err := s.InputList(b.ctx, &store.InputListParams{Status: store.InputPending, Limit: 10})
			require.NoError(t, err)
			require.Len(t, pending, 1)
		}

		// The journal goes on after the largest imported id.
		last, err := fresh.store.EventLastID(fresh.ctx)
		require.NoError(t, err)
		require.Equal(t, want.Events[len(want.Events)-1].ID, last)
		next := fresh.insert(t, store.TaskInsertParams{Now: at(24 * time.Hour)})
		require.Greater(t, fresh.lastEvent(t, next.ID).ID, last)

		// Imported state behaves: the pending input is answerable, and its
		// default answer and expiry came along.
		n, err := fresh.store.InputExpire(fresh.ctx, at(48*time.Hour))
		require.NoError(t, err)
		require.Equal(t, 1, n)
		answered, err := fresh.store.InputList(fresh.ctx, &store.InputListParams{Status: store.InputAnswered, Limit: 10})
		require.NoError(t, err)
		require.Len(t, answered, 2)

		// An imported task that waited goes on with its attempt, as the
		// original does.
		_, err = b.store.InputExpire(b.ctx, at(48*time.Hour))
		require.NoError(t, err)
		attempts := func(bb *testBundle) map[string]int {
			out := map[string]int{}
			for _, task := range bb.claim(t, store.TaskLeaseManyParams{Owner: "w", Now: at(49 * time.Hour)}) {
				out[task.ID] = task.Attempt
			}
			return out
		}
		orig := attempts(b)
		require.NotEmpty(t, orig)
		delete(orig, next.ID)
		imported := attempts(fresh)
		delete(imported, next.ID)
		require.Equal(t, orig, imported)
	})

	t.Run("Since", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		old := b.insert(t, store.TaskInsertParams{Now: at(0)})
		b.claimAndFinish(t, old, store.StatusCompleted) // updated at 1m
		recent := b.insert(t, store.TaskInsertParams{Now: at(time.Hour)})
		touched := b.insert(t, store.TaskInsertParams{Now: at(0)})
		_, err := b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: touched.ID, Now: at(2 * time.Hour)})
		require.NoError(t, err)

		got := exportAll(t, b, b.store, base.Add(time.Hour), 1)
		var ids []string
		for _, rec := range got.Tasks {
			ids = append(ids, rec.ID)
		}
		require.Equal(t, []string{recent.ID, touched.ID}, ids, "tasks updated at or after since, oldest first")
		require.Equal(t, []string{recent.ID, touched.ID}, []string{got.Events[0].TaskID, got.Events[1].TaskID})
		require.Len(t, got.Events, 2, "events at or after since")
		require.Len(t, got.Notifications, 1)
		require.Equal(t, touched.ID, got.Notifications[0].TaskID)
	})

	t.Run("ConflictWritesNothing", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		fillForExport(t, b)
		batch := exportAll(t, b, b.store, time.Time{}, 100)

		fresh := newBundle(t, newDatabase)
		existing := fresh.insert(t, store.TaskInsertParams{ID: batch.Tasks[3].ID, Now: at(0)})
		before := exportAll(t, fresh, fresh.store, time.Time{}, 100)
		require.Len(t, before.Tasks, 1)

		for name, conflicting := range map[string]*store.Batch{
			"TaskID":  {Tasks: batch.Tasks, Events: batch.Events[1:]},
			"EventID": {Tasks: batch.Tasks[4:], Events: batch.Events},
			"StepKey": {Tasks: batch.Tasks[4:], Steps: append(batch.Steps[:1:1], batch.Steps[0])},
		} {
			err := fresh.store.BatchImport(fresh.ctx, conflicting)
			require.ErrorIs(t, err, store.ErrConflict, name)
			require.Equal(t, before, exportAll(t, fresh, fresh.store, time.Time{}, 100), "%s: nothing was written", name)
		}
		require.Equal(t, existing, fresh.get(t, existing.ID))

		// A second import of the same rows conflicts too, and changes nothing.
		again := newBundle(t, newDatabase)
		require.NoError(t, again.store.BatchImport(again.ctx, batch))
		loaded := exportAll(t, again, again.store, time.Time{}, 100)
		require.Equal(t, batch, loaded)
		require.ErrorIs(t, again.store.BatchImport(again.ctx, batch), store.ErrConflict)
		require.Equal(t, loaded, exportAll(t, again, again.store, time.Time{}, 100))
	})

	t.Run("EmptyStore", func(t *testing.T) {
		t.Parallel()
		b := newBundle(t, newDatabase)
		page, err := b.store.BatchExport(b.ctx, &store.BatchExportParams{Limit: 10})
		require.NoError(t, err)
		require.Zero(t, page.Len())
		require.NoError(t, b.store.BatchImport(b.ctx, &store.Batch{}), "an empty batch is fine")
	})
}

// fillForExport writes tasks in many states, with steps, questions,
// dependencies, a checkpoint, a lease, budgets, notifications and a read
// one: 10 tasks.
func fillForExport(t *testing.T, b *testBundle) {
	t.Helper()
	// claim claims the one task of agent, at now.
	claim := func(task *store.Task, now time.Duration) *store.Task {
		t.Helper()
		return b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "host:1:boot", Agents: []string{task.Agent}, Now: at(now)})
	}
	key := "idem-export"
	done := b.insert(t, store.TaskInsertParams{
		Agent: "done", SessionID: "s1", Title: "Done", Tags: []string{"export", "x"}, Priority: 7,
		Input: json.RawMessage(`{"q":"x"}`), Metadata: json.RawMessage(`{"m":1}`), IdempotencyKey: key,
		Budget:  &store.Budget{MaxTokens: 1000, MaxCostUSD: 1, MaxWallClock: store.Duration(time.Hour), MaxToolCalls: 5},
		Options: &store.Options{MaxSteps: 4, Tools: []string{"web"}, SystemPrompt: "Be brief.", Source: store.SourceUser},
	})
	running := claim(done, time.Second)
	require.NoError(t, b.store.TaskBudgetReserve(b.ctx, &store.TaskBudgetReserveParams{Lease: leaseOf(running), Amount: store.Amount{Tokens: 900, CostUSD: 0.5}, Now: at(time.Second)}))
	st := b.startStep(t, store.StepStartParams{Lease: leaseOf(running), StepNo: 1, Input: json.RawMessage(`{"prompt":"hi"}`), Now: at(2 * time.Second)})
	b.finishStep(t, store.StepFinishParams{Lease: leaseOf(running), IdempotencyKey: st.IdempotencyKey, Status: store.StepDone,
		Output: json.RawMessage(`{"text":"hello"}`), TokensIn: 800, TokensOut: 50, CostUSD: 0.125, DurationMS: 1500,
		Checkpoint: json.RawMessage(`{"step":1}`), Release: store.Amount{Tokens: 900, CostUSD: 0.5}, Now: at(3 * time.Second)})
	tool := b.startStep(t, store.StepStartParams{Lease: leaseOf(running), StepNo: 2, Type: store.StepToolCall, Tool: "shell", Now: at(4 * time.Second)})
	b.finishStep(t, store.StepFinishParams{Lease: leaseOf(running), IdempotencyKey: tool.IdempotencyKey, Status: store.StepDenied,
		ErrorCode: "tool_denied", ErrorMessage: "not allowed", Now: at(5 * time.Second)})
	require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(running), Status: store.StatusCompleted,
		Result: json.RawMessage(`{"output":"all done","warning":null}`), Now: at(6 * time.Second)}))
	require.NotNil(t, b.get(t, done.ID).Consumed)

	failed := b.insert(t, store.TaskInsertParams{Agent: "failed", SessionID: "s1"})
	b.claimAndFinish(t, failed, store.StatusFailed)

	asking := b.insert(t, store.TaskInsertParams{Agent: "asking", SessionID: "s2", Title: "Asks"})
	def := "the default"
	require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claim(asking, 10*time.Second)), Status: store.StatusInputRequired,
		Ask: &store.InputAsk{ID: "inp_export_1", Question: "Which?", Context: json.RawMessage(`{"o":[1,2]}`),
			ExpiresAt: base.Add(24 * time.Hour), DefaultAnswer: &def}, Now: at(11 * time.Second)}))

	answered := b.insert(t, store.TaskInsertParams{Agent: "answered"})
	require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claim(answered, 12*time.Second)), Status: store.StatusInputRequired,
		Ask: &store.InputAsk{ID: "inp_export_2", Question: "Sure?"}, Now: at(13 * time.Second)}))
	_, err := b.store.InputAnswer(b.ctx, &store.InputAnswerParams{RequestID: "inp_export_2", Answer: "yes", Now: at(14 * time.Second)})
	require.NoError(t, err)

	blocked := b.insert(t, store.TaskInsertParams{Agent: "blocked", DependsOn: []string{asking.ID, answered.ID},
		OnDependencyFailure: store.OnDependencyFailureRun})
	_, err = b.store.TaskDependencyAdd(b.ctx, &store.TaskDependencyAddParams{TaskID: blocked.ID, DependsOnID: done.ID,
		Kind: store.DependencyRelated, Now: at(15 * time.Second)})
	require.NoError(t, err)

	cancelling := b.insert(t, store.TaskInsertParams{Agent: "cancelling"})
	cancelLease := claim(cancelling, 16*time.Second)
	require.NoError(t, b.store.TaskCheckpoint(b.ctx, &store.TaskCheckpointParams{Lease: leaseOf(cancelLease), Checkpoint: json.RawMessage(`{"goal":"g"}`), Now: at(17 * time.Second)}))
	require.NoError(t, b.store.TaskProgress(b.ctx, &store.TaskProgressParams{Lease: leaseOf(cancelLease), Progress: store.Progress{CurrentStep: 1, TotalSteps: 3, Label: "one", Percentage: 33}, Now: at(17 * time.Second)}))
	_, err = b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: cancelling.ID, Reason: "changed my mind", Now: at(18 * time.Second)})
	require.NoError(t, err)

	paused := b.insert(t, store.TaskInsertParams{Agent: "paused", RunAt: at(time.Hour)})
	_, err = b.store.TaskPause(b.ctx, &store.TaskPauseParams{ID: paused.ID, Now: at(19 * time.Second)})
	require.NoError(t, err)

	parent := b.insert(t, store.TaskInsertParams{Agent: "parent", Budget: &store.Budget{MaxTokens: 500}})
	require.NoError(t, b.finish(t, store.TaskFinishParams{Lease: leaseOf(claim(parent, 20*time.Second)), Status: store.StatusWaitingSubtasks, Now: at(20 * time.Second)}))
	b.insert(t, store.TaskInsertParams{Agent: "child", ParentID: parent.ID, Now: at(21 * time.Second)})

	quiet := b.insert(t, store.TaskInsertParams{Agent: "quiet", Options: &store.Options{ResultRoute: store.ResultRouteNone}})
	_, err = b.store.TaskCancel(b.ctx, &store.TaskCancelParams{ID: quiet.ID, Now: at(22 * time.Second)})
	require.NoError(t, err)

	first, err := b.store.NotificationList(b.ctx, &store.NotificationListParams{SessionID: "s1", Limit: 1})
	require.NoError(t, err)
	require.Len(t, first, 1)
	acked, err := b.store.NotificationAck(b.ctx, &store.NotificationAckParams{IDs: []int64{first[0].ID}, Now: at(30 * time.Second)})
	require.NoError(t, err)
	require.Equal(t, 1, acked)
}

// exportAll reads everything an export holds from s: the tasks page by page
// (pageSize a page) with their rows, then the whole journal and inbox, at or
// after since when it is set.
func exportAll(t *testing.T, b *testBundle, s store.Store, since time.Time, pageSize int) *store.Batch {
	t.Helper()
	all := &store.Batch{}
	after := ""
	for {
		page, err := s.BatchExport(b.ctx, &store.BatchExportParams{After: after, UpdatedSince: since, Limit: pageSize})
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.Tasks), pageSize)
		require.Empty(t, page.Events)
		require.Empty(t, page.Notifications)
		if len(page.Tasks) == 0 {
			require.Zero(t, page.Len(), "rows without tasks")
			break
		}
		for _, rec := range page.Tasks {
			require.Greater(t, rec.ID, after, "tasks in id order")
			after = rec.ID
		}
		all.Tasks = append(all.Tasks, page.Tasks...)
		all.Steps = append(all.Steps, page.Steps...)
		all.Inputs = append(all.Inputs, page.Inputs...)
		all.Dependencies = append(all.Dependencies, page.Dependencies...)
	}
	var afterID int64
	for {
		evs, err := s.EventList(b.ctx, &store.EventListParams{AfterID: afterID, Since: since, Limit: 3})
		require.NoError(t, err)
		if len(evs) == 0 {
			break
		}
		all.Events = append(all.Events, evs...)
		afterID = evs[len(evs)-1].ID
	}
	afterID = 0
	for {
		ns, err := s.NotificationList(b.ctx, &store.NotificationListParams{AfterID: afterID, Since: since, Limit: 3})
		require.NoError(t, err)
		if len(ns) == 0 {
			break
		}
		all.Notifications = append(all.Notifications, ns...)
		afterID = ns[len(ns)-1].ID
	}
	return all
}
