// Package storetest is the conformance suite every store.Store driver must
// pass unchanged. A driver's test only provides a factory:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) func() store.Store {
//			path := filepath.Join(t.TempDir(), "errand.db") // one database per test
//			return func() store.Store { // one more handle on it
//				s, err := sqlitestore.Open(context.Background(), path, nil)
//				require.NoError(t, err)
//				t.Cleanup(func() { require.NoError(t, s.Close()) })
//				return s
//			}
//		})
//	}
//
// Every behaviour the doc comments of package store promise is checked here:
// inserts and idempotency, the transition table, claiming order and races,
// fencing tokens, finishing, cancelling, lease recovery, listing, the
// event journal, schedules and their firings. Time is always pinned
// through the params' Now field, so the suite never sleeps; times are
// compared at microsecond precision, the precision drivers must keep.
package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

// NewDatabaseFunc creates an empty database for one test and returns a function that opens a new
// handle (a new store.Store) on that same database; handles are closed by t.Cleanup inside open.
type NewDatabaseFunc func(t *testing.T) (open func() store.Store)

// Run runs the whole conformance suite against the driver newDatabase opens.
// Every case runs in parallel on a database of its own.
func Run(t *testing.T, newDatabase NewDatabaseFunc) {
	t.Helper()
	areas := []struct {
		name string
		run  func(*testing.T, NewDatabaseFunc)
	}{
		{"TaskInsert", testTaskInsert},
		{"Idempotency", testIdempotency},
		{"Transitions", testTransitions},
		{"Claim", testClaim},
		{"Fencing", testFencing},
		{"Finish", testFinish},
		{"Cancel", testCancel},
		{"Recover", testRecover},
		{"List", testList},
		{"Events", testEvents},
		{"Step", testStep},
		{"Fork", testFork},
		{"AgentVersion", testAgentVersion},
		{"Budget", testBudget},
		{"Input", testInput},
		{"Dependency", testDependency},
		{"Subtask", testSubtask},
		{"Pause", testPause},
		{"Debounce", testDebounce},
		{"Notification", testNotification},
		{"Cursor", testCursor},
		{"Spend", testSpend},
		{"Transfer", testTransfer},
		{"Schedule", testSchedule},
		{"EventInsert", testEventInsert},
		{"FollowUp", testFollowUp},
		{"Lanes", testLanes},
		{"Concurrency", testConcurrency},
		{"Flow", testFlow},
		{"Purge", testPurge},
		{"SpendGuard", testSpendGuard},
		{"Memories", testMemory},
		{"MemoryTrust", testMemoryTrust},
		{"Leader", testLeader},
		{"PushConfig", testPushConfig},
		{"PromptOverhead", testPromptOverhead},
	}
	for _, area := range areas {
		t.Run(area.name, func(t *testing.T) {
			t.Parallel()
			area.run(t, newDatabase)
		})
	}
}

// base is the pinned "now" every test starts from.
var base = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// defaultTTL is the lease TTL of claims that do not name one.
const defaultTTL = time.Minute

// at returns a pointer to base+d, for the params' Now field.
func at(d time.Duration) *time.Time {
	tm := base.Add(d)
	return &tm
}

var idCounter atomic.Int64

// newTaskID returns a fresh task id. Ids sort lexically in creation order.
func newTaskID() string {
	return fmt.Sprintf("tsk_%012d", idCounter.Add(1))
}

// newRunID returns a fresh run id.
func newRunID() string {
	return fmt.Sprintf("run_%012d", idCounter.Add(1))
}

// testBundle is what every test works with: one store on a fresh database,
// and a way to open more handles on that database.
type testBundle struct {
	ctx   context.Context
	store store.Store
	open  func() store.Store
}

func newBundle(t *testing.T, newDatabase NewDatabaseFunc) *testBundle {
	t.Helper()
	open := newDatabase(t)
	return &testBundle{ctx: t.Context(), store: open(), open: open}
}

// fillInsert fills the fields a test leaves empty with valid values.
func fillInsert(p *store.TaskInsertParams) *store.TaskInsertParams {
	if p.ID == "" {
		p.ID = newTaskID()
	}
	if p.RunID == "" && p.ParentID == "" {
		p.RunID = newRunID()
	}
	if p.Agent == "" {
		p.Agent = "default"
	}
	if p.Goal == "" {
		p.Goal = "goal of " + p.ID
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = 5
	}
	if p.Actor == "" {
		p.Actor = store.ActorUser
	}
	if p.Now == nil {
		p.Now = at(0)
	}
	return p
}

// insert writes one task and requires that it was inserted.
func (b *testBundle) insert(t *testing.T, p store.TaskInsertParams) *store.Task {
	t.Helper()
	res, err := b.store.TaskInsert(b.ctx, fillInsert(&p))
	require.NoError(t, err)
	require.True(t, res.Inserted)
	require.Equal(t, p.ID, res.Task.ID)
	return res.Task
}

// insertN writes n tasks like p, each with a fresh id, in id order.
func (b *testBundle) insertN(t *testing.T, n int, p store.TaskInsertParams) []*store.Task {
	t.Helper()
	tasks := make([]*store.Task, 0, n)
	for range n {
		q := p
		q.ID = ""
		tasks = append(tasks, b.insert(t, q))
	}
	return tasks
}

// get reads one task and requires that it exists.
func (b *testBundle) get(t *testing.T, id string) *store.Task {
	t.Helper()
	task, err := b.store.TaskGetByID(b.ctx, id)
	require.NoError(t, err)
	require.Equal(t, id, task.ID)
	return task
}

// claim calls TaskLeaseMany, filling Owner, Limit, TTL and Now when unset.
func (b *testBundle) claim(t *testing.T, p store.TaskLeaseManyParams) []*store.Task {
	t.Helper()
	if p.Owner == "" {
		p.Owner = "worker-1"
	}
	if p.Limit == 0 {
		p.Limit = 1000
	}
	if p.TTL == 0 {
		p.TTL = defaultTTL
	}
	if p.Now == nil {
		p.Now = at(0)
	}
	tasks, err := b.store.TaskLeaseMany(b.ctx, &p)
	require.NoError(t, err)
	require.LessOrEqual(t, len(tasks), p.Limit)
	return tasks
}

// claimOne claims exactly one task and requires that it is wantID.
func (b *testBundle) claimOne(t *testing.T, wantID string, p store.TaskLeaseManyParams) *store.Task {
	t.Helper()
	p.Limit = 1
	tasks := b.claim(t, p)
	require.Len(t, tasks, 1)
	require.Equal(t, wantID, tasks[0].ID)
	return tasks[0]
}

// requireNoClaim requires that nothing is claimable at now.
func (b *testBundle) requireNoClaim(t *testing.T, now *time.Time) {
	t.Helper()
	require.Empty(t, b.claim(t, store.TaskLeaseManyParams{Owner: "probe", Now: now}))
}

// finish ends one lease through TaskFinishMany and returns its per-item error.
func (b *testBundle) finish(t *testing.T, p store.TaskFinishParams) error {
	t.Helper()
	if p.Actor == "" {
		p.Actor = store.AgentActor(p.Lease.TaskID)
	}
	if p.Now == nil {
		p.Now = at(0)
	}
	errs, err := b.store.TaskFinishMany(b.ctx, []*store.TaskFinishParams{&p})
	require.NoError(t, err)
	require.Len(t, errs, 1)
	return errs[0]
}

// recover calls TaskRecover and returns the recovered tasks by id.
func (b *testBundle) recover(t *testing.T, now *time.Time, owners ...string) map[string]*store.Task {
	t.Helper()
	tasks, err := b.store.TaskRecover(b.ctx, &store.TaskRecoverParams{Owners: owners, Now: now})
	require.NoError(t, err)
	byID := make(map[string]*store.Task, len(tasks))
	for _, task := range tasks {
		require.NotContains(t, byID, task.ID, "task recovered twice in one call")
		byID[task.ID] = task
	}
	return byID
}

// renew calls LeaseRenewMany and requires one result per lease, in order.
func (b *testBundle) renew(t *testing.T, now *time.Time, ttl time.Duration, leases ...store.Lease) []store.LeaseRenewResult {
	t.Helper()
	res, err := b.store.LeaseRenewMany(b.ctx, &store.LeaseRenewManyParams{Leases: leases, TTL: ttl, Now: now})
	require.NoError(t, err)
	require.Len(t, res, len(leases))
	for i, r := range res {
		require.Equal(t, leases[i].TaskID, r.TaskID, "renew result %d", i)
	}
	return res
}

// allEvents returns the whole journal in id order.
func (b *testBundle) allEvents(t *testing.T) []*store.Event {
	t.Helper()
	return b.eventList(t, store.EventListParams{})
}

// events returns one task's events in id order.
func (b *testBundle) events(t *testing.T, taskID string) []*store.Event {
	t.Helper()
	return b.eventList(t, store.EventListParams{TaskID: taskID})
}

func (b *testBundle) eventList(t *testing.T, p store.EventListParams) []*store.Event {
	t.Helper()
	if p.Limit == 0 {
		p.Limit = 10000
	}
	evs, err := b.store.EventList(b.ctx, &p)
	require.NoError(t, err)
	require.LessOrEqual(t, len(evs), p.Limit)
	for i := 1; i < len(evs); i++ {
		require.Greater(t, evs[i].ID, evs[i-1].ID, "event ids must increase")
	}
	return evs
}

// lastEvent returns a task's newest event.
func (b *testBundle) lastEvent(t *testing.T, taskID string) *store.Event {
	t.Helper()
	evs := b.events(t, taskID)
	require.NotEmpty(t, evs)
	return evs[len(evs)-1]
}

// requireEventTypes requires a task's event types to be exactly want, in order.
func (b *testBundle) requireEventTypes(t *testing.T, taskID string, want ...string) {
	t.Helper()
	require.Equal(t, want, eventTypes(b.events(t, taskID)), "events of %s", taskID)
}

// listAll returns every task, newest first.
func (b *testBundle) listAll(t *testing.T) []*store.Task {
	t.Helper()
	tasks, err := b.store.TaskList(b.ctx, &store.TaskListParams{Limit: 10000})
	require.NoError(t, err)
	return tasks
}

func eventTypes(evs []*store.Event) []string {
	types := make([]string, 0, len(evs))
	for _, ev := range evs {
		types = append(types, ev.Type)
	}
	return types
}

func eventIDs(evs []*store.Event) []int64 {
	ids := make([]int64, 0, len(evs))
	for _, ev := range evs {
		ids = append(ids, ev.ID)
	}
	return ids
}

func taskIDs(tasks []*store.Task) []string {
	ids := make([]string, 0, len(tasks))
	for _, task := range tasks {
		ids = append(ids, task.ID)
	}
	return ids
}

// sortedDesc returns the ids of tasks, newest (highest id) first.
func sortedDesc(tasks ...*store.Task) []string {
	ids := taskIDs(tasks)
	slices.Sort(ids)
	slices.Reverse(ids)
	return ids
}

func leaseOf(task *store.Task) store.Lease {
	return store.Lease{TaskID: task.ID, Token: task.LeaseToken}
}

// transitionData decodes the payload of a status-change event.
func transitionData(t *testing.T, ev *store.Event) store.TransitionData {
	t.Helper()
	var data store.TransitionData
	require.NoError(t, json.Unmarshal(ev.Data, &data), "event %d (%s) data %s", ev.ID, ev.Type, ev.Data)
	return data
}

// requireTime requires got to be want at microsecond precision.
func requireTime(t *testing.T, want, got time.Time, what string) {
	t.Helper()
	w, g := want.Truncate(time.Microsecond), got.Truncate(time.Microsecond)
	require.Truef(t, w.Equal(g), "%s: want %s, got %s", what, w.UTC().Format(time.RFC3339Nano), g.UTC().Format(time.RFC3339Nano))
}

// requireZeroTime requires got to be unset.
func requireZeroTime(t *testing.T, got time.Time, what string) {
	t.Helper()
	require.Truef(t, got.IsZero(), "%s: want zero time, got %s", what, got)
}

// requireNoJSON requires raw to hold no value (absent or JSON null).
func requireNoJSON(t *testing.T, raw json.RawMessage, what string) {
	t.Helper()
	require.Truef(t, len(raw) == 0 || string(raw) == "null", "%s: want no value, got %s", what, raw)
}

// claimAndFinish claims the task a minute in and finishes it with status
// (a failure gets an error).
func (b *testBundle) claimAndFinish(t *testing.T, task *store.Task, status store.Status) {
	t.Helper()
	claimed := b.claimOne(t, task.ID, store.TaskLeaseManyParams{Owner: "w", Limit: 1, Now: at(time.Minute)})
	p := store.TaskFinishParams{Lease: leaseOf(claimed), Status: status, Now: at(time.Minute)}
	if status == store.StatusFailed {
		p.Error = &store.TaskError{Code: "boom", Message: "boom"}
	}
	require.NoError(t, b.finish(t, p))
}
