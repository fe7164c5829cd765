package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
)

// "Rerun from here" forks the task from the step and opens the fork,
// which names its source and marks its copied steps; the source lists
// it. A bad step is refused with the reason.
func TestRerunFromHere(t *testing.T) {
	h := setup(t)
	b := h.browser(t)
	h.login(t, b)
	ran := make(chan int, 16)
	require.NoError(t, h.client.RegisterAgent("default", errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
		for n := 1; n <= 2; n++ {
			if _, err := run.PaidStep(ctx, n, "draft", 0.02, func(context.Context, string) (any, float64, error) {
				ran <- n
				return n, 0.01, nil
			}); err != nil {
				return errand.Result{}, err
			}
		}
		return errand.Result{Output: "drafted " + run.Task().Goal}, nil
	})))
	engine, err := errand.NewEngine(h.client, &errand.EngineConfig{Workers: 1})
	require.NoError(t, err)
	require.NoError(t, engine.Start(context.Background()))
	t.Cleanup(func() { _ = engine.Stop(context.Background()) })

	src, err := h.client.Submit(t.Context(), &errand.SubmitParams{Goal: "the digest"})
	require.NoError(t, err)
	waitEvent(t, h.client, src.ID, "task.completed")
	require.Equal(t, 1, <-ran)
	require.Equal(t, 2, <-ran)

	_, page := get(t, b, h.srv.URL+"/tasks/"+src.ID)
	require.Equal(t, 2, strings.Count(page, `<form class="rerun" method="post" action="/tasks/`+src.ID+`/fork">`), "one per step")
	require.Contains(t, page, `<input type="hidden" name="from_step" value="2">`)
	csrf := csrfOf(t, page)

	for _, tc := range []struct {
		form   url.Values
		status int
		says   string
	}{
		{url.Values{"csrf": {csrf}}, http.StatusBadRequest, "not a step number"},
		{url.Values{"csrf": {csrf}, "from_step": {"x"}}, http.StatusBadRequest, "not a step number"},
		{url.Values{"csrf": {csrf}, "from_step": {"9"}}, http.StatusUnprocessableEntity, "from_step"},
		{url.Values{"csrf": {csrf}, "from_step": {"2"}, "answer": {"yes"}}, http.StatusUnprocessableEntity, "answer"},
		{url.Values{"csrf": {csrf}, "from_step": {"2"}, "goal": {"\xff"}}, http.StatusBadRequest, "not valid text"},
		{url.Values{"from_step": {"2"}}, http.StatusForbidden, "stale"},
	} {
		resp, body := post(t, b, h.srv.URL+"/tasks/"+src.ID+"/fork", tc.form)
		require.Equal(t, tc.status, resp.StatusCode, "%v: %s", tc.form, body)
		require.Contains(t, body, tc.says, tc.form)
	}
	resp, _ := post(t, b, h.srv.URL+"/tasks/tsk_nope/fork", url.Values{"csrf": {csrf}, "from_step": {"1"}})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	resp, _ = post(t, b, h.srv.URL+"/tasks/"+src.ID+"/fork", url.Values{"csrf": {csrf}, "from_step": {"2"}, "goal": {"the digest, shorter"}, "answer": {" "}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	forkID := strings.TrimPrefix(resp.Header.Get("Location"), "/tasks/")
	fork, err := h.client.Get(t.Context(), forkID)
	require.NoError(t, err)
	require.Equal(t, &errand.ForkRef{TaskID: src.ID, StepNo: 2}, fork.ForkedFrom)
	require.Equal(t, "the digest, shorter", fork.Goal)
	waitEvent(t, h.client, forkID, "task.completed")
	require.Equal(t, 2, <-ran, "the fork runs step 2 alone")
	fork, err = h.client.Get(t.Context(), forkID)
	require.NoError(t, err)
	require.InDelta(t, 0.01, fork.Consumed.CostUSD, 1e-9, "the fork pays for step 2 only")

	_, page = get(t, b, h.srv.URL+"/tasks/"+forkID)
	require.Contains(t, page, `<dt>Forked from</dt><dd><a href="/tasks/`+src.ID+`">`+src.ID+`</a> at step 2`)
	require.Contains(t, page, `<span class="note">copied from <a href="/tasks/`+src.ID+`">`)
	require.Equal(t, 1, strings.Count(page, "copied from"), "step 2 is the fork's own")
	require.Contains(t, page, "<dt>Copied steps</dt><dd>1, which cost $0.0100 where they ran")
	_, page = get(t, b, h.srv.URL+"/tasks/"+src.ID)
	require.Contains(t, page, `<dt>Forks</dt><dd class="links"><a href="/tasks/`+forkID+`">`)
}
