package pgstore

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

// graphNow pins every write of the graph races.
var graphNow = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// graphRounds is how often each race runs per test: each round is one
// more chance for the two transactions to overlap.
const graphRounds = 8

// graphBundle is two daemons (Store handles) on one database.
type graphBundle struct {
	stores [2]*Store
}

func setupGraph(t *testing.T) *graphBundle {
	t.Helper()
	dsn := testDSN(t)
	return &graphBundle{stores: [2]*Store{openTest(t, dsn), openTest(t, dsn)}}
}

func (b *graphBundle) insert(t *testing.T, p store.TaskInsertParams) *store.Task {
	t.Helper()
	res, err := b.stores[0].TaskInsert(t.Context(), b.fill(&p))
	require.NoError(t, err)
	return res.Task
}

func (b *graphBundle) fill(p *store.TaskInsertParams) *store.TaskInsertParams {
	if p.RunID == "" {
		p.RunID = "run_" + p.ID
	}
	p.Goal, p.MaxAttempts, p.Actor, p.Now = "race", 1, store.ActorUser, &graphNow
	return p
}

// claim leases every ready task of agent, by id.
func (b *graphBundle) claim(t *testing.T, agent string, n int) map[string]store.Lease {
	t.Helper()
	got, err := b.stores[0].TaskLeaseMany(t.Context(), &store.TaskLeaseManyParams{
		Owner: "w", Limit: n, TTL: time.Hour, Agents: []string{agent}, Now: &graphNow})
	require.NoError(t, err)
	require.Len(t, got, n)
	leases := map[string]store.Lease{}
	for _, task := range got {
		leases[task.ID] = store.Lease{TaskID: task.ID, Token: task.LeaseToken}
	}
	return leases
}

// finish ends one lease through daemon i.
func (b *graphBundle) finish(t *testing.T, i int, lease store.Lease, to store.Status) error {
	p := &store.TaskFinishParams{Lease: lease, Status: to, Now: &graphNow}
	if to == store.StatusFailed {
		p.Error = &store.TaskError{Code: "x", Message: "y"}
	}
	errs, err := b.stores[i].TaskFinishMany(t.Context(), []*store.TaskFinishParams{p})
	if err != nil {
		return err
	}
	return errs[0]
}

// race runs f(0) and f(1) on two goroutines released together, and
// returns their errors.
func race(f func(i int) error) [2]error {
	var (
		errs  [2]error
		ready sync.WaitGroup
		wg    sync.WaitGroup
	)
	start := make(chan struct{})
	ready.Add(2)
	for i := range 2 {
		wg.Go(func() {
			ready.Done()
			<-start
			errs[i] = f(i)
		})
	}
	ready.Wait()
	close(start)
	wg.Wait()
	return errs
}

func (b *graphBundle) get(t *testing.T, id string) *store.Task {
	t.Helper()
	task, err := b.stores[0].TaskGetByID(t.Context(), id)
	require.NoError(t, err)
	return task
}

// eventCount counts a task's events of one type.
func (b *graphBundle) eventCount(t *testing.T, id, typ string) int {
	t.Helper()
	return b.stores[0].count(t, `SELECT count(*) FROM task_events WHERE task_id = $1 AND type = $2`, id, typ)
}

// Two blockers of one task ending at once, through two daemons, settle it
// once: neither transaction may take the other's blocker for still open.
func TestBlockersEndingAtOnceSettleTheirDependent(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		end    store.Status
		want   store.Status
		events string
	}{
		{"Completed", store.StatusCompleted, store.StatusPending, store.EventTaskUnblocked},
		{"Failed", store.StatusFailed, store.StatusFailed, store.EventTaskFailed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupGraph(t)
			for round := range graphRounds {
				a := b.insert(t, store.TaskInsertParams{ID: fmt.Sprintf("tsk_%d_a", round), Agent: "blocker"})
				c := b.insert(t, store.TaskInsertParams{ID: fmt.Sprintf("tsk_%d_b", round), Agent: "blocker"})
				d := b.insert(t, store.TaskInsertParams{ID: fmt.Sprintf("tsk_%d_d", round), Agent: "dependent", DependsOn: []string{a.ID, c.ID}})
				leases := b.claim(t, "blocker", 2)
				blockers := [2]string{a.ID, c.ID}
				errs := race(func(i int) error { return b.finish(t, i, leases[blockers[i]], tt.end) })
				require.NoError(t, errs[0])
				require.NoError(t, errs[1])
				require.Equal(t, tt.want, b.get(t, d.ID).Status, "round %d", round)
				require.Equal(t, 1, b.eventCount(t, d.ID, tt.events), "round %d", round)
				if tt.end == store.StatusCompleted {
					b.claim(t, "dependent", 1) // out of the way of the next round
				}
			}
		})
	}
}

// Two children of a waiting parent ending at once, through two daemons,
// resume it once.
func TestChildrenEndingAtOnceResumeTheirParent(t *testing.T) {
	t.Parallel()
	b := setupGraph(t)
	for round := range graphRounds {
		p := b.insert(t, store.TaskInsertParams{ID: fmt.Sprintf("tsk_%d_p", round), Agent: "parent"})
		parentLease := b.claim(t, "parent", 1)[p.ID]
		var children [2]string
		for i := range children {
			children[i] = b.insert(t, store.TaskInsertParams{ID: fmt.Sprintf("tsk_%d_c%d", round, i), ParentID: p.ID, Agent: "child"}).ID
		}
		require.NoError(t, b.finish(t, 0, parentLease, store.StatusWaitingSubtasks))
		require.Equal(t, store.StatusWaitingSubtasks, b.get(t, p.ID).Status)
		leases := b.claim(t, "child", 2)
		errs := race(func(i int) error { return b.finish(t, i, leases[children[i]], store.StatusCompleted) })
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		require.Equal(t, store.StatusPending, b.get(t, p.ID).Status, "round %d", round)
		require.Equal(t, 1, b.eventCount(t, p.ID, store.EventTaskSubtasksDone), "round %d", round)
		b.claim(t, "parent", 1)
	}
}

// A task inserted depending on a blocker that completes at that moment
// does not stay blocked, whether the blocker is its sibling (the insert
// holds their parent) or not.
func TestInsertRacingItsBlockersEnd(t *testing.T) {
	t.Parallel()
	for _, sibling := range []bool{false, true} {
		t.Run(fmt.Sprintf("Sibling=%t", sibling), func(t *testing.T) {
			t.Parallel()
			b := setupGraph(t)
			for round := range graphRounds {
				parentID := ""
				if sibling {
					parentID = b.insert(t, store.TaskInsertParams{ID: fmt.Sprintf("tsk_%d_p", round), Agent: "parent"}).ID
					b.claim(t, "parent", 1)
				}
				blocker := b.insert(t, store.TaskInsertParams{ID: fmt.Sprintf("tsk_%d_b", round), ParentID: parentID, Agent: "blocker"})
				lease := b.claim(t, "blocker", 1)[blocker.ID]
				dependent := fmt.Sprintf("tsk_%d_d", round)
				errs := race(func(i int) error {
					if i == 0 {
						return b.finish(t, 0, lease, store.StatusCompleted)
					}
					_, err := b.stores[1].TaskInsert(t.Context(), b.fill(&store.TaskInsertParams{
						ID: dependent, ParentID: parentID, Agent: "dependent", DependsOn: []string{blocker.ID}}))
					return err
				})
				require.NoError(t, errs[0])
				require.NoError(t, errs[1])
				require.Equal(t, store.StatusPending, b.get(t, dependent).Status, "round %d", round)
				b.claim(t, "dependent", 1)
			}
		})
	}
}

// Two edges added at once that would close a cycle together cannot both
// be added.
func TestDependencyAddsRacingCannotCloseACycle(t *testing.T) {
	t.Parallel()
	b := setupGraph(t)
	for round := range graphRounds {
		// x -> y -> z: adding z -> w and w -> x at once would close it.
		ids := make([]string, 4)
		for i, name := range []string{"x", "y", "z", "w"} {
			ids[i] = b.insert(t, store.TaskInsertParams{ID: fmt.Sprintf("tsk_%d_%s", round, name), Agent: "a"}).ID
		}
		add := func(i int, task, on string) error {
			_, err := b.stores[i].TaskDependencyAdd(t.Context(), &store.TaskDependencyAddParams{TaskID: task, DependsOnID: on, Now: &graphNow})
			return err
		}
		require.NoError(t, add(0, ids[0], ids[1]))
		require.NoError(t, add(0, ids[1], ids[2]))
		errs := race(func(i int) error {
			if i == 0 {
				return add(0, ids[2], ids[3])
			}
			return add(1, ids[3], ids[0])
		})
		require.True(t, (errs[0] == nil) != (errs[1] == nil), "round %d: exactly one add fails: %v", round, errs)
		for _, err := range errs {
			if err != nil {
				require.ErrorIs(t, err, store.ErrCycle)
			}
		}
	}
}

// A purge racing a write that makes a reference to a finished task
// either removes the task first (and the write finds it gone) or keeps it:
// no edge is ever left naming a task that is not there.
func TestPurgeRacingAReference(t *testing.T) {
	t.Parallel()
	for _, viaAdd := range []bool{false, true} {
		t.Run(fmt.Sprintf("DependencyAdd=%t", viaAdd), func(t *testing.T) {
			t.Parallel()
			b := setupGraph(t)
			cutoff := graphNow.Add(time.Hour)
			for round := range graphRounds {
				old := b.insert(t, store.TaskInsertParams{ID: fmt.Sprintf("tsk_%d_o", round), Agent: "old"})
				require.NoError(t, b.finish(t, 0, b.claim(t, "old", 1)[old.ID], store.StatusCompleted))
				later := graphNow.Add(24 * time.Hour)
				open := b.insert(t, store.TaskInsertParams{ID: fmt.Sprintf("tsk_%d_n", round), Agent: "open", RunAt: &later})
				var purged []string
				errs := race(func(i int) error {
					if i == 0 {
						res, err := b.stores[0].TaskPurge(t.Context(), &store.TaskPurgeParams{FinishedBefore: cutoff, Limit: 10})
						if err == nil {
							purged = res.TaskIDs
						}
						return err
					}
					if viaAdd {
						_, err := b.stores[1].TaskDependencyAdd(t.Context(), &store.TaskDependencyAddParams{
							TaskID: open.ID, DependsOnID: old.ID, Now: &graphNow})
						return err
					}
					_, err := b.stores[1].TaskInsert(t.Context(), b.fill(&store.TaskInsertParams{
						ID: fmt.Sprintf("tsk_%d_d", round), Agent: "open", RunAt: &later, DependsOn: []string{old.ID}}))
					return err
				})
				require.NoError(t, errs[0])
				if len(purged) > 0 {
					require.Equal(t, []string{old.ID}, purged)
					require.ErrorIs(t, errs[1], store.ErrNotFound, "round %d: the reference came second and found it gone", round)
				} else {
					require.NoError(t, errs[1], "round %d", round)
				}
				require.Zero(t, b.stores[0].count(t, `SELECT count(*) FROM task_dependencies d
					WHERE NOT EXISTS (SELECT 1 FROM tasks WHERE id = d.depends_on_id)`), "round %d", round)
			}
		})
	}
}

// A blocked task resumed while its last blocker completes does not stay
// blocked: the resume counts with the end committed, or the end finds the
// task blocked again.
func TestResumeRacingTheLastBlockersEnd(t *testing.T) {
	t.Parallel()
	b := setupGraph(t)
	for round := range graphRounds {
		blocker := b.insert(t, store.TaskInsertParams{ID: fmt.Sprintf("tsk_%d_b", round), Agent: "blocker"})
		d := b.insert(t, store.TaskInsertParams{ID: fmt.Sprintf("tsk_%d_d", round), Agent: "dependent", DependsOn: []string{blocker.ID}})
		_, err := b.stores[0].TaskPause(t.Context(), &store.TaskPauseParams{ID: d.ID, Now: &graphNow})
		require.NoError(t, err)
		lease := b.claim(t, "blocker", 1)[blocker.ID]
		errs := race(func(i int) error {
			if i == 0 {
				return b.finish(t, 0, lease, store.StatusCompleted)
			}
			_, err := b.stores[1].TaskResume(t.Context(), &store.TaskPauseParams{ID: d.ID, Now: &graphNow})
			return err
		})
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		require.Equal(t, store.StatusPending, b.get(t, d.ID).Status, "round %d", round)
		b.claim(t, "dependent", 1)
	}
}
