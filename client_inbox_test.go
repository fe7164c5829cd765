package errand

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/store"
)

func TestInbox(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := openTest(t, nil)
	submit := func(p SubmitParams) *Task {
		t.Helper()
		task, err := c.Submit(ctx, &p)
		require.NoError(t, err)
		return task
	}
	complete := func(task *Task, output string) {
		t.Helper()
		run := storeRun(t, c, task)
		storeFinish(t, c, store.TaskFinishParams{Lease: store.Lease{TaskID: run.ID, Token: run.LeaseToken},
			Status: store.StatusCompleted, Result: json.RawMessage(`{"output":` + output + `,"warning":null}`)})
	}

	research := submit(SubmitParams{Goal: "Research X", Agent: "a1", SessionID: "s1"})
	other := submit(SubmitParams{Goal: "Other session", Agent: "a2", SessionID: "s2"})
	quiet := submit(SubmitParams{Goal: "Quiet", Agent: "a3", SessionID: "s1", ResultRoute: "none"})
	parent := submit(SubmitParams{Goal: "Parent", Agent: "a4", SessionID: "s1"})
	child := submit(SubmitParams{Goal: "Child", Agent: "a5", ParentID: parent.ID, SessionID: "s1"})
	complete(research, `"Three papers."`)
	complete(other, `{"n":1}`)
	complete(quiet, `"shh"`)
	complete(child, `"child result"`)
	_, err := c.Cancel(ctx, parent.ID, "enough")
	require.NoError(t, err)

	all, err := c.Inbox(ctx, nil)
	require.NoError(t, err)
	var texts []string
	for _, n := range all {
		texts = append(texts, n.Text)
	}
	require.Equal(t, []string{
		"[Task completed] 'Research X' — Three papers.",
		`[Task completed] 'Other session' — {"n":1}`,
		"[Task cancelled] 'Parent' — enough",
	}, texts, "no notification for a route of none or a subtask")

	s1, err := c.Inbox(ctx, &InboxParams{SessionID: "s1", Unread: true})
	require.NoError(t, err)
	require.Len(t, s1, 2)
	require.Equal(t, research.ID, s1[0].TaskID)
	require.Equal(t, EventTaskCompleted, s1[0].EventType)
	require.True(t, s1[0].ReadAt.IsZero())
	again, err := c.Inbox(ctx, &InboxParams{SessionID: "s1", Unread: true})
	require.NoError(t, err)
	require.Equal(t, s1, again, "reading changes nothing")

	acked, err := c.InboxAck(ctx, &InboxAckParams{IDs: []int64{s1[0].ID, s1[1].ID}})
	require.NoError(t, err)
	require.Equal(t, 2, acked)
	again, err = c.Inbox(ctx, &InboxParams{SessionID: "s1", Unread: true})
	require.NoError(t, err)
	require.Empty(t, again, "acknowledged notifications are read")
	for _, bad := range []*InboxAckParams{nil, {}, {IDs: []int64{1}, UpToID: 1}, {IDs: []int64{0}}, {UpToID: -1}, {IDs: []int64{1}, SessionID: "s1"},
		{IDs: make([]int64, MaxInboxAckIDs+1)}} {
		_, err := c.InboxAck(ctx, bad)
		require.ErrorIs(t, err, ErrInvalid, "%+v", bad)
	}
	_, err = c.InboxAck(ctx, &InboxAckParams{IDs: []int64{s1[0].ID, 424242}})
	require.ErrorIs(t, err, ErrNotFound)
	unread, err := c.Inbox(ctx, &InboxParams{Unread: true})
	require.NoError(t, err)
	require.Len(t, unread, 1)
	require.Equal(t, "s2", unread[0].SessionID)

	first, err := c.Inbox(ctx, &InboxParams{Limit: 1})
	require.NoError(t, err)
	require.Len(t, first, 1)
	_, err = c.Inbox(ctx, &InboxParams{Limit: 1001})
	require.ErrorIs(t, err, ErrInvalid)
	_, err = c.Inbox(ctx, &InboxParams{Limit: -1})
	require.ErrorIs(t, err, ErrInvalid)

	// A notification's JSON is snake_case, read_at absent until read.
	b, err := json.Marshal(unread[0])
	require.NoError(t, err)
	var fields map[string]any
	require.NoError(t, json.Unmarshal(b, &fields))
	require.ElementsMatch(t, []string{"id", "session_id", "task_id", "event_id", "event_type", "text", "created_at"}, jsonKeys(fields))
}

func jsonKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
