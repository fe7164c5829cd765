package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
)

// aguiAgents are the agents the AG-UI tests run: asker looks something up
// (a recorded step), asks which day, then finishes with both; failer
// fails; planner declares a plan in its checkpoint, reports progress and
// finishes; waiter finishes when gate is closed.
func aguiAgents(gate ...chan struct{}) map[string]errand.Agent {
	return map[string]errand.Agent{
		"waiter": errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
			select {
			case <-gate[0]:
				return errand.Result{Output: "waited"}, nil
			case <-ctx.Done():
				return errand.Result{}, ctx.Err()
			}
		}),
		"asker": errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
			out, err := run.Step(ctx, 1, "lookup", func(context.Context, string) (any, error) {
				return map[string]string{"city": "Rome"}, nil
			})
			if err != nil {
				return errand.Result{}, err
			}
			answers, err := run.Answers(ctx)
			if err != nil {
				return errand.Result{}, err
			}
			if len(answers) == 0 {
				return errand.Result{}, errand.AskUser("Which day?")
			}
			var found struct{ City string }
			_ = json.Unmarshal(out, &found)
			return errand.Result{Output: found.City + " on " + answers[0].Answer}, nil
		}),
		"failer": errand.AgentFunc(func(context.Context, *errand.TaskRun) (errand.Result, error) {
			return errand.Result{}, errand.NonRetryable("no_luck", errors.New("it did not work"))
		}),
		"planner": errand.AgentFunc(func(ctx context.Context, run *errand.TaskRun) (errand.Result, error) {
			if err := run.Checkpoint(ctx, map[string]any{"plan": []map[string]string{{"title": "look", "status": "completed"}}}); err != nil {
				return errand.Result{}, err
			}
			if err := run.Progress(ctx, 1, 1, "looked"); err != nil {
				return errand.Result{}, err
			}
			return errand.Result{Output: map[string]int{"n": 1}}, nil
		}),
	}
}

// aguiEvent is an AG-UI event as a client reads it.
type aguiEvent map[string]any

func (e aguiEvent) typ() string { s, _ := e["type"].(string); return s }

// aguiRun posts body to /api/ag-ui and reads the run's events.
func (f *fixture) aguiRun(body string) []aguiEvent {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.t.Context(), "POST", f.http.URL+"/api/ag-ui", strings.NewReader(body))
	require.NoError(f.t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(f.t, err)
	require.Equal(f.t, http.StatusOK, res.StatusCode, string(b))
	require.Equal(f.t, "text/event-stream", res.Header.Get("Content-Type"))
	var evs []aguiEvent
	for block := range strings.SplitSeq(string(b), "\n\n") {
		for line := range strings.SplitSeq(block, "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var ev aguiEvent
				require.NoError(f.t, json.Unmarshal([]byte(data), &ev), data)
				evs = append(evs, ev)
			}
		}
	}
	require.NotEmpty(f.t, evs)
	require.Equal(f.t, "RUN_STARTED", evs[0].typ())
	return evs
}

// aguiTypes are the types of evs but STATE_SNAPSHOT, whose number depends
// on how fast the task moves: each is sent when the task's state differs
// from the last one sent.
func aguiTypes(evs []aguiEvent) []string {
	var out []string
	for _, ev := range evs {
		if ev.typ() != "STATE_SNAPSHOT" {
			out = append(out, ev.typ())
		}
	}
	return out
}

// aguiLastState is the last state snapshot of evs.
func aguiLastState(t *testing.T, evs []aguiEvent) map[string]any {
	t.Helper()
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].typ() == "STATE_SNAPSHOT" {
			return evs[i]["snapshot"].(map[string]any)
		}
	}
	require.FailNow(t, "no STATE_SNAPSHOT")
	return nil
}

func aguiBody(thread, run string, extra string) string {
	return fmt.Sprintf(`{"threadId":%q,"runId":%q,"state":{},"tools":[],"context":[],"messages":[{"id":"u1","role":"user","content":"plan a trip"}]%s}`, thread, run, extra)
}

func TestAGUIInterruptAndResume(t *testing.T) {
	t.Parallel()
	f := newFixture(t, aguiAgents())

	evs := f.aguiRun(aguiBody("thread-1", "run-1", `,"forwardedProps":{"errand":{"agent":"asker"}}`))
	require.Equal(t, []string{"RUN_STARTED", "STEP_STARTED", "TOOL_CALL_START", "TOOL_CALL_END", "TOOL_CALL_RESULT",
		"STEP_FINISHED", "RUN_FINISHED"}, aguiTypes(evs))
	require.Equal(t, "thread-1", evs[0]["threadId"])
	require.Equal(t, "run-1", evs[0]["runId"])
	state := aguiLastState(t, evs)
	require.Equal(t, "input_required", state["status"])
	taskID := state["task_id"].(string)
	for _, ev := range evs {
		switch ev.typ() {
		case "TOOL_CALL_START":
			require.Equal(t, "lookup", ev["toolCallName"])
		case "TOOL_CALL_RESULT":
			require.JSONEq(t, `{"city":"Rome"}`, ev["content"].(string))
		}
	}
	fin := evs[len(evs)-1]
	outcome := fin["outcome"].(map[string]any)
	require.Equal(t, "interrupt", outcome["type"])
	in := outcome["interrupts"].([]any)[0].(map[string]any)
	require.Equal(t, "Which day?", in["message"])
	require.Equal(t, "input_required", in["reason"])
	interruptID := in["id"].(string)
	require.True(t, strings.HasPrefix(interruptID, "inp_"), interruptID)

	task, err := f.client.Get(t.Context(), taskID)
	require.NoError(t, err)
	require.Equal(t, "thread-1", task.SessionID, "the thread is the task's session")
	require.Equal(t, "plan a trip", task.Goal)

	// Following the waiting task again ends at once with the same interrupt.
	evs = f.aguiRun(aguiBody("thread-1", "run-2", `,"forwardedProps":{"errand":{"task_id":"`+taskID+`"}}`))
	require.Equal(t, []string{"RUN_STARTED", "STATE_SNAPSHOT", "RUN_FINISHED"}, []string{evs[0].typ(), evs[1].typ(), evs[2].typ()})
	require.Len(t, evs, 3)
	require.Equal(t, interruptID, evs[2]["outcome"].(map[string]any)["interrupts"].([]any)[0].(map[string]any)["id"])

	// The resume entry answers it; the run follows the task to its end.
	evs = f.aguiRun(aguiBody("thread-1", "run-3", `,"resume":[{"interruptId":"`+interruptID+`","status":"resolved","payload":"Friday"}]`))
	fin = evs[len(evs)-1]
	require.Equal(t, "RUN_FINISHED", fin.typ(), "%v", aguiTypes(evs))
	require.Equal(t, "success", fin["outcome"].(map[string]any)["type"])
	require.Equal(t, "Rome on Friday", fin["result"])
	require.NotContains(t, aguiTypes(evs), "TOOL_CALL_START", "the replayed step is not shown again")

	// Answering again is a conflict, said before any stream.
	res, body := f.do("POST", "/api/ag-ui", aguiBody("thread-1", "run-4", `,"resume":[{"interruptId":"`+interruptID+`","status":"resolved","payload":"Monday"}]`))
	require.Equal(t, http.StatusConflict, res.StatusCode, string(body))

	// A completed task followed by its id as the thread: its result.
	evs = f.aguiRun(aguiBody(taskID, "run-5", ""))
	require.Len(t, evs, 3)
	require.Equal(t, []string{"RUN_STARTED", "RUN_FINISHED"}, aguiTypes(evs))
	require.Equal(t, "Rome on Friday", evs[2]["result"])
}

func TestAGUIAnswerInForwardedProps(t *testing.T) {
	t.Parallel()
	f := newFixture(t, aguiAgents())
	evs := f.aguiRun(aguiBody("thread-2", "run-1", `,"forwardedProps":{"errand":{"agent":"asker"}}`))
	require.Equal(t, "interrupt", evs[len(evs)-1]["outcome"].(map[string]any)["type"])
	// No task named: the thread's waiting task takes the answer.
	evs = f.aguiRun(aguiBody("thread-2", "run-2", `,"forwardedProps":{"errand":{"answer":"Sunday"}}`))
	require.Equal(t, "Rome on Sunday", evs[len(evs)-1]["result"])

	res, body := f.do("POST", "/api/ag-ui", aguiBody("thread-2", "run-3", `,"forwardedProps":{"errand":{"answer":"again"}}`))
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode, string(body))
	require.Contains(t, string(body), `"field":"forwardedProps.errand.answer"`)
}

func TestAGUIDeclinedInterruptCancelsTheTask(t *testing.T) {
	t.Parallel()
	f := newFixture(t, aguiAgents())
	evs := f.aguiRun(aguiBody("thread-3", "run-1", `,"forwardedProps":{"errand":{"agent":"asker"}}`))
	in := evs[len(evs)-1]["outcome"].(map[string]any)["interrupts"].([]any)[0].(map[string]any)
	evs = f.aguiRun(aguiBody("thread-3", "run-2", `,"resume":[{"interruptId":"`+in["id"].(string)+`","status":"cancelled"}]`))
	fin := evs[len(evs)-1]
	require.Equal(t, "cancelled", fin["outcome"].(map[string]any)["type"], "%v", evs)
	require.Contains(t, fin["metadata"].(map[string]any)["errand"].(map[string]any)["reason"], "declined")
}

func TestAGUIFailureAndState(t *testing.T) {
	t.Parallel()
	f := newFixture(t, aguiAgents())
	evs := f.aguiRun(aguiBody("thread-4", "run-1", `,"forwardedProps":{"errand":{"agent":"failer"}}`))
	last := evs[len(evs)-1]
	require.Equal(t, "RUN_ERROR", last.typ())
	require.Equal(t, "no_luck", last["code"])
	require.Contains(t, last["message"], "it did not work")

	evs = f.aguiRun(aguiBody("thread-5", "run-1", `,"forwardedProps":{"errand":{"agent":"planner"}}`))
	var plan any
	for _, ev := range evs {
		if ev.typ() == "STATE_SNAPSHOT" {
			if p, ok := ev["snapshot"].(map[string]any)["plan"]; ok {
				plan = p
			}
		}
	}
	require.Equal(t, []any{map[string]any{"title": "look", "status": "completed"}}, plan)
	require.Equal(t, map[string]any{"n": float64(1)}, evs[len(evs)-1]["result"])

	// The same run posted again follows the task it started.
	again := f.aguiRun(aguiBody("thread-5", "run-1", `,"forwardedProps":{"errand":{"agent":"planner"}}`))
	require.Len(t, again, 3)
	require.Equal(t, []string{"RUN_STARTED", "RUN_FINISHED"}, aguiTypes(again))
	require.Equal(t, evs[1]["snapshot"].(map[string]any)["task_id"], again[1]["snapshot"].(map[string]any)["task_id"])
}

func TestAGUIRefusesBadInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t, aguiAgents())
	for body, want := range map[string]struct {
		status int
		field  string
	}{
		`{"runId":"r","messages":[]}`:                                                                                        {400, "threadId"},
		`{"threadId":"t","runId":"r","messages":[]}`:                                                                         {400, "messages"},
		aguiBody("t", "r", `,"messages":[{"id":"a","role":"user","content":"  "}]`):                                          {400, "messages[0].content"},
		aguiBody("t", "r", `,"forwardedProps":{"errand":{"agent":"nobody"}}`):                                                {422, "forwardedProps.errand.agent"},
		aguiBody("t", "r", `,"forwardedProps":{"errand":{"task_id":"`+unknownID+`"}}`):                                       {422, "forwardedProps.errand.task_id"},
		aguiBody("t", "r", `,"forwardedProps":{"errand":{"task_id":"inp_x"}}`):                                               {400, "forwardedProps.errand.task_id"},
		aguiBody("t", "r", `,"resume":[{"interruptId":"inp_0000000000000000000000000A","status":"cancelled"}]`):              {409, ""},
		aguiBody("t", "r", `,"resume":[{"interruptId":"x","status":"resolved","payload":"a"}]`):                              {422, "resume[0].interruptId"},
		aguiBody("t", "r", `,"resume":[{"interruptId":"inp_0000000000000000000000000A","status":"resolved","payload":"a"}]`): {422, "resume[0].interruptId"},
	} {
		res, b := f.do("POST", "/api/ag-ui", body)
		require.Equal(t, want.status, res.StatusCode, "%s: %s", body, b)
		var e struct {
			Error struct{ Field, Message string }
		}
		require.NoError(t, json.Unmarshal(b, &e), string(b))
		require.Equal(t, want.field, e.Error.Field, "%s: %s", body, b)
		require.NotEmpty(t, e.Error.Message)
	}
	res, _ := f.doAuth("POST", "/api/ag-ui", aguiBody("t", "r", ""), "")
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
}

// aguiOpen posts body and returns the run's events as they come; the
// channel is closed when the stream ends.
func (f *fixture) aguiOpen(ctx context.Context, body string) <-chan aguiEvent {
	f.t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", f.http.URL+"/api/ag-ui", strings.NewReader(body))
	require.NoError(f.t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	require.Equal(f.t, http.StatusOK, res.StatusCode)
	out := make(chan aguiEvent, 100)
	go func() {
		defer close(out)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev aguiEvent
				if json.Unmarshal([]byte(data), &ev) == nil {
					out <- ev
				}
			}
		}
	}()
	return out
}

// aguiUntilRunning reads evs until a snapshot says the task runs, and
// returns the task's id.
func aguiUntilRunning(t *testing.T, evs <-chan aguiEvent) string {
	t.Helper()
	for ev := range evs {
		if ev.typ() == "STATE_SNAPSHOT" && ev["snapshot"].(map[string]any)["status"] == "running" {
			return ev["snapshot"].(map[string]any)["task_id"].(string)
		}
	}
	require.FailNow(t, "the stream ended before the task ran")
	return ""
}

func TestAGUIServerStopEndsTheRunNotTheTask(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	f := newFixture(t, aguiAgents(gate))
	evs := f.aguiOpen(t.Context(), aguiBody("thread-6", "run-1", `,"forwardedProps":{"errand":{"agent":"waiter"}}`))
	taskID := aguiUntilRunning(t, evs)

	f.server.CloseStreams()
	var last aguiEvent
	for ev := range evs {
		last = ev
	}
	require.Equal(t, "RUN_ERROR", last.typ())
	require.Equal(t, "unavailable", last["code"])
	require.Contains(t, last["message"], taskID, "it says how to follow the task again")
	f.server.WaitStreams()

	task, err := f.client.Get(t.Context(), taskID)
	require.NoError(t, err)
	require.Equal(t, errand.StatusRunning, task.Status, "the task goes on")
	close(gate)
}

func TestAGUIClientLeavingEndsOnlyItsRun(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	f := newFixture(t, aguiAgents(gate))
	ctx, cancel := context.WithCancel(t.Context())
	evs := f.aguiOpen(ctx, aguiBody("thread-7", "run-1", `,"forwardedProps":{"errand":{"agent":"waiter"}}`))
	taskID := aguiUntilRunning(t, evs)
	sub, err := f.client.Subscribe(t.Context(), errand.EventFilter{TaskID: taskID, Types: []string{errand.EventTaskCompleted}}, 0)
	require.NoError(t, err)
	defer sub.Close()
	cancel()
	for range evs {
	}
	close(gate)
	<-sub.Events()

	// A later run follows the task it started: to its result.
	got := f.aguiRun(aguiBody("thread-7", "run-2", `,"forwardedProps":{"errand":{"task_id":"`+taskID+`"}}`))
	require.Equal(t, "waited", got[len(got)-1]["result"])
}

// FuzzAGUIBody posts arbitrary RunAgentInput bodies: every answer is
// below 500, a refusal is JSON naming what is wrong and leaves the store as
// it was, and an acceptance is a stream.
func FuzzAGUIBody(f *testing.F) {
	b := newFuzzBundle(f)
	pending, cancelled, asking := b.ids[0], b.ids[1], b.ids[2]
	f.Add([]byte(aguiBody("t", "r", "")))
	f.Add([]byte(aguiBody(pending, "r", "")))
	f.Add([]byte(aguiBody("s2", "r", `,"forwardedProps":{"errand":{"answer":"x"}}`)))
	f.Add([]byte(aguiBody("t", "r", `,"forwardedProps":{"errand":{"task_id":"`+cancelled+`"}}`)))
	f.Add([]byte(aguiBody("t", "r", `,"forwardedProps":{"errand":{"task_id":"`+asking+`","answer":"x"}}`)))
	f.Add([]byte(aguiBody("t", "r", `,"forwardedProps":{"errand":{"agent":"ask"}}`)))
	f.Add([]byte(aguiBody("t", "r", `,"resume":[{"interruptId":"inp_0000000000000000000000000A","status":"cancelled"}]`)))
	f.Add([]byte(aguiBody("t", "r", `,"resume":[{"interruptId":"inp_x","status":"resolved","payload":{"answer":"y"}}]`)))
	f.Add([]byte(`{"threadId":"t","runId":"r","messages":[{"id":"a","role":"user","content":[{"type":"text","text":"\u0000"}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		before := b.dataVersion(t)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, "POST", "/api/ag-ui", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		rec := &streamRecorder{ResponseRecorder: httptest.NewRecorder(), cancel: cancel}
		b.handler.ServeHTTP(rec, req)
		res := rec.Result()
		if res.StatusCode >= 500 {
			t.Fatalf("%q: %d %s", body, res.StatusCode, rec.Body.String())
		}
		if res.StatusCode == http.StatusOK {
			if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Fatalf("%q: 200 with %q", body, ct)
			}
			return
		}
		var e struct{ Error struct{ Message string } }
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Message == "" {
			t.Fatalf("%q: %d %q", body, res.StatusCode, rec.Body.String())
		}
		if after := b.dataVersion(t); after != before {
			t.Fatalf("%q: refused (%d %s) but the store changed", body, res.StatusCode, rec.Body.String())
		}
	})
}
