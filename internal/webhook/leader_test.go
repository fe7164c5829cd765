package webhook

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
)

// leaseTTL is the lease of the tests' dispatchers: renewed every second.
const leaseTTL = 3 * time.Second

var errDead = errors.New("process is dead")

// startOwner runs a Dispatcher named owner on the bundle's journal and
// returns its stop function and the channel of its attempts.
func (b *testBundle) startOwner(t *testing.T, owner string, hooks ...Hook) (stop func(), attempts chan attempt) {
	t.Helper()
	attempts = make(chan attempt, 1000)
	cfg := b.config(t, hooks...)
	cfg.Owner, cfg.LeaseTTL = owner, leaseTTL
	cfg.OnAttemptFunc = func(hook string, eventID int64, err error) { attempts <- attempt{hook, eventID, err} }
	return b.start(t, cfg), attempts
}

// tick moves time on by a third of the lease, when every dispatcher asks
// for its lease again, and waits for the asks of owners.
func (b *testBundle) tick(t *testing.T, owners ...string) map[string]bool {
	t.Helper()
	b.clock.Advance(leaseTTL / 3)
	held := map[string]bool{}
	for len(held) < len(owners) {
		select {
		case c := <-b.journal.leads:
			if slices.Contains(owners, c.owner) {
				held[c.owner] = c.held && c.err == nil
			}
		case <-time.After(waitTimeout):
			require.FailNow(t, "no Lead call", "owners %v, got %v", owners, held)
		}
	}
	return held
}

// receiveIDs waits for n requests and returns their webhook-ids.
func (rc *receiver) receiveIDs(t *testing.T, n int) []int64 {
	t.Helper()
	var ids []int64
	for range n {
		id, err := strconv.ParseInt(rc.next(t).header.Get(HeaderID), 10, 64)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	return ids
}

// deliveredBy waits for the successful attempts of ids, in order, on a
// dispatcher's channel: each was posted and its cursor saved.
func deliveredBy(t *testing.T, attempts chan attempt, hook string, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		select {
		case a := <-attempts:
			require.Equal(t, attempt{hook: hook, eventID: id}, a)
		case <-time.After(waitTimeout):
			require.FailNow(t, "not delivered", "event %d", id)
		}
	}
}

func TestOneDispatcherDeliversEachHook(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	b.startAt(rc.url(), 0)
	lease := CursorName(rc.url())

	stopA, byA := b.startOwner(t, "a", rc.hook())
	require.True(t, b.journal.waitLead(t, "a").held)
	_, byB := b.startOwner(t, "b", rc.hook())
	require.False(t, b.journal.waitLead(t, "b").held, "a holds the hook")

	b.journal.add(errand.EventTaskCreated, errand.EventTaskStarted, errand.EventTaskCompleted)
	require.Equal(t, []int64{1, 2, 3}, rc.receiveIDs(t, 3))
	deliveredBy(t, byA, rc.url(), 1, 2, 3)
	// A whole lease goes by: a renews, b is refused each time.
	for range 3 {
		require.Equal(t, map[string]bool{"a": true, "b": false}, b.tick(t, "a", "b"))
	}
	b.journal.add(errand.EventTaskCreated, errand.EventTaskCompleted)
	require.Equal(t, []int64{4, 5}, rc.receiveIDs(t, 2))
	deliveredBy(t, byA, rc.url(), 4, 5)
	require.Empty(t, byB)

	// A clean stop saves the cursor and releases the lease: b takes over
	// at its next ask, not a lease later, and goes on from the cursor.
	stopA()
	require.Empty(t, b.journal.holder(lease))
	require.Equal(t, "unlead "+lease+" a", b.journal.opLog()[len(b.journal.opLog())-1])
	b.journal.add(errand.EventTaskCreated, errand.EventTaskCompleted)
	require.Equal(t, map[string]bool{"b": true}, b.tick(t, "b"))
	require.Equal(t, []int64{6, 7}, rc.receiveIDs(t, 2))
	deliveredBy(t, byB, rc.url(), 6, 7)
	require.Equal(t, int64(7), b.journal.cursor(t, lease))
	require.Equal(t, 7, rc.count(), "each event posted once")
}

func TestTakeoverAfterLeaderDies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	b.startAt(rc.url(), 0)
	lease := CursorName(rc.url())

	stopA, byA := b.startOwner(t, "a", rc.hook())
	require.True(t, b.journal.waitLead(t, "a").held)
	_, byB := b.startOwner(t, "b", rc.hook())
	require.False(t, b.journal.waitLead(t, "b").held)
	b.journal.add(errand.EventTaskCreated, errand.EventTaskStarted, errand.EventTaskCompleted)
	require.Equal(t, []int64{1, 2, 3}, rc.receiveIDs(t, 3))
	deliveredBy(t, byA, rc.url(), 1, 2, 3)
	// a renews at 1 s, until 4 s.
	require.Equal(t, map[string]bool{"a": true, "b": false}, b.tick(t, "a", "b"))

	// a dies: it renews no more and releases nothing.
	b.journal.setLeadErr("a", errDead)
	stopA()
	require.Equal(t, "a", b.journal.holder(lease))
	b.journal.add(errand.EventTaskCreated, errand.EventTaskFailed)

	// b is refused while a's lease lasts, and nothing is posted.
	for range 2 {
		require.Equal(t, map[string]bool{"b": false}, b.tick(t, "b"))
	}
	require.Equal(t, 3, rc.count())
	require.Empty(t, byB)

	// At its expiry b takes over, from the cursor a saved: nothing lost,
	// nothing sent twice.
	require.Equal(t, map[string]bool{"b": true}, b.tick(t, "b"))
	require.Equal(t, []int64{4, 5}, rc.receiveIDs(t, 2))
	deliveredBy(t, byB, rc.url(), 4, 5)
	require.Equal(t, int64(5), b.journal.cursor(t, lease))
	require.Equal(t, 5, rc.count())
}

func TestLostLeaseStopsDelivery(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		lose    func(b *testBundle, lease string)
		recover func(b *testBundle, lease string)
	}{
		{
			name: "Refused",
			lose: func(b *testBundle, lease string) {
				b.journal.mu.Lock()
				defer b.journal.mu.Unlock()
				b.journal.leases[lease] = fakeLease{owner: "thief", expires: b.clock.Now().Add(time.Hour)}
			},
			recover: func(b *testBundle, lease string) {
				b.journal.mu.Lock()
				defer b.journal.mu.Unlock()
				delete(b.journal.leases, lease)
			},
		},
		{
			name:    "Failed",
			lose:    func(b *testBundle, _ string) { b.journal.setLeadErr("a", errors.New("journal unavailable")) },
			recover: func(b *testBundle, _ string) { b.journal.setLeadErr("a", nil) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			aborted := make(chan struct{})
			rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 1 {
					<-r.Context().Done()
					close(aborted)
					return
				}
				w.WriteHeader(http.StatusNoContent)
			})
			b.startAt(rc.url(), 0)
			lease := CursorName(rc.url())
			hook := rc.hook()
			hook.Events = []string{errand.EventTaskCompleted}

			_, byA := b.startOwner(t, "a", hook)
			require.True(t, b.journal.waitLead(t, "a").held)
			// Event 1 is passed over (its cursor not yet written), event 2
			// hangs in flight.
			b.journal.add(errand.EventTaskCreated, errand.EventTaskCompleted)
			require.Equal(t, "2", rc.next(t).header.Get(HeaderID))

			tt.lose(b, lease)
			require.Equal(t, map[string]bool{"a": false}, b.tick(t, "a"))
			select {
			case <-aborted:
			case <-time.After(waitTimeout):
				require.FailNow(t, "the attempt in flight went on after the lease was lost")
			}
			// The loser writes no cursor: it is the next holder's.
			require.Empty(t, b.journal.writes(lease))

			// Asked again every third of the lease; once it holds the
			// lease again it resends from its cursor.
			require.Equal(t, map[string]bool{"a": false}, b.tick(t, "a"))
			tt.recover(b, lease)
			b.journal.add(errand.EventTaskCompleted)
			require.Equal(t, map[string]bool{"a": true}, b.tick(t, "a"))
			require.Equal(t, []int64{2, 3}, rc.receiveIDs(t, 2))
			deliveredBy(t, byA, rc.url(), 2, 3)
			require.Equal(t, int64(3), b.journal.cursor(t, lease))
		})
	}
}

func TestShutdownSavesThenReleases(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	b.startAt(rc.url(), 0)
	lease := CursorName(rc.url())
	hook := rc.hook()
	hook.Events = []string{errand.EventTaskCompleted}

	stop, _ := b.startOwner(t, "a", hook)
	require.True(t, b.journal.waitLead(t, "a").held)
	b.journal.add(errand.EventTaskCreated)
	b.journal.waitSent(t, 1)
	stop()

	require.Equal(t, []string{"set " + lease + " 1", "unlead " + lease + " a"}, b.journal.opLog())
	require.Empty(t, b.journal.holder(lease))
	require.Zero(t, rc.count())
}

func TestNotLeaderDoesNotTouchTheCursor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	lease := CursorName(rc.url())
	b.journal.add(errand.EventTaskCreated)
	b.journal.mu.Lock()
	b.journal.leases[lease] = fakeLease{owner: "other", expires: b.clock.Now().Add(time.Hour)}
	b.journal.mu.Unlock()

	stop, _ := b.startOwner(t, "a", rc.hook())
	require.False(t, b.journal.waitLead(t, "a").held)
	require.Equal(t, map[string]bool{"a": false}, b.tick(t, "a"))
	stop()

	// Only the release, which leaves the other owner's lease alone.
	require.Equal(t, []string{"unlead " + lease + " a"}, b.journal.opLog())
	require.Equal(t, "other", b.journal.holder(lease))
	_, found, err := b.journal.Cursor(t.Context(), lease)
	require.NoError(t, err)
	require.False(t, found, "a new hook's cursor is made by the holder only")
}

func TestLeaseConfig(t *testing.T) {
	t.Parallel()
	_, err := New(Config{Journal: newFakeJournal(), LeaseTTL: time.Microsecond})
	require.ErrorContains(t, err, "lease ttl")

	d1, err := New(Config{Journal: newFakeJournal()})
	require.NoError(t, err)
	d2, err := New(Config{Journal: newFakeJournal()})
	require.NoError(t, err)
	require.Equal(t, DefaultLeaseTTL, d1.cfg.LeaseTTL)
	require.NotEmpty(t, d1.cfg.Owner)
	require.NotEqual(t, d1.cfg.Owner, d2.cfg.Owner, "each Dispatcher an owner of its own")
}
