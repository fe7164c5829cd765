//go:build unix

package agent

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/internal/telemetry"
	"github.com/errandhq/errand/internal/telemetry/telemetrytest"
	"github.com/errandhq/errand/store"
)

// subtaskScript is an exec agent whose step 1 asks for a subtask of agent
// charter and returns the TRACEPARENT errand gave it; step 2 finishes.
const subtaskScript = stepOf + `if [ "$step" = 1 ]; then
  printf '{"status":"continue","output":{"traceparent":"%s"},"subtasks":[{"goal":"Draw a chart","agent":"charter"}]}\n' "${TRACEPARENT:-}"
else
  echo '{"status":"finish","output":"charted"}'
fi
`

// An exec agent's step is traced like any other: its command gets the
// step's span as TRACEPARENT. The subtasks its reply asks for hang under a
// task.submit_subtasks span under the step; a child its command submits
// through the API with that TRACEPARENT hangs under the step itself; a
// child with a traceparent of another trace stays in the run's trace.
func TestTraceExecSubtasks(t *testing.T) {
	t.Parallel()
	b := setupTraced(t, telemetry.Config{})
	cmd, _ := writeScript(t, subtaskScript)
	started := make(chan struct{})
	release := make(chan struct{})
	charter := taskrun.HandlerFunc(func(ctx context.Context, r taskrun.Run) (taskrun.Result, error) {
		close(started)
		select {
		case <-release:
		case <-ctx.Done():
			return taskrun.Result{}, ctx.Err()
		}
		return taskrun.Result{Output: json.RawMessage(`"chart"`)}, nil
	})
	b.startAgents(t, map[string]taskrun.Handler{
		"default": newExecAgent(t, ExecConfig{Command: cmd}), "charter": charter, "api": quickAgent,
	})
	ctx := context.Background()
	task := submit(t, b.bundle, &engine.SubmitParams{Goal: "chart Q3"})
	<-started
	b.waitEnd(t, task.ID, store.EventTaskStep) // step 1 is recorded

	// The parent waits for its subtask: its command's child submits two
	// more, as `curl -H "traceparent: $TRACEPARENT"` would.
	recs := steps(t, b.bundle, task.ID)
	require.NotEmpty(t, recs)
	var reply struct {
		Output struct {
			Traceparent string `json:"traceparent"`
		} `json:"output"`
	}
	require.NoError(t, json.Unmarshal(recs[0].Output, &reply), string(recs[0].Output))
	tp := reply.Output.Traceparent
	_, valid := telemetry.ParseTraceparent(tp)
	require.True(t, valid, "TRACEPARENT %q", tp)
	viaAPI := submit(t, b.bundle, &engine.SubmitParams{Goal: "via the API", Agent: "api", ParentID: task.ID,
		Metadata: telemetry.WithTraceparent(nil, tp)})
	foreign := submit(t, b.bundle, &engine.SubmitParams{Goal: "another trace", Agent: "api", ParentID: task.ID,
		Metadata: telemetry.WithTraceparent(nil, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")})
	close(release)
	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)

	spans := b.flush(t)
	runTrace := telemetry.RunTraceID(task.RunID).String()
	byID := map[string]telemetrytest.Span{}
	attemptOf := map[string]telemetrytest.Span{} // by task id: its first attempt
	for _, s := range spans {
		require.Equal(t, runTrace, s.TraceID, s.Name)
		byID[s.SpanID] = s
		if id, ok := s.Attrs[telemetry.AttrTaskID].(string); ok && s.Name == telemetry.SpanAttempt {
			if _, seen := attemptOf[id]; !seen {
				attemptOf[id] = s
			}
		}
	}
	t.Logf("trace:\n%s", telemetrytest.Tree(spans))

	key := taskrun.StepKey(task.ID, 1, 0)
	var step telemetrytest.Span
	for _, s := range spans {
		if s.Name == telemetry.SpanStep && s.Attrs[telemetry.AttrStepKey] == key {
			step = s
		}
	}
	require.Equal(t, "exec", step.Attrs[telemetry.AttrStepTool])
	require.Equal(t, "00-"+runTrace+"-"+step.SpanID+"-01", tp, "the step's span, sampled")

	kids, err := b.engine.List(ctx, &engine.ListParams{ParentID: task.ID, Limit: 10})
	require.NoError(t, err)
	var fromReply string
	for _, k := range kids.Tasks {
		if k.Agent == "charter" {
			fromReply = k.ID
		}
	}
	require.NotEmpty(t, fromReply)

	submitSpan := byID[attemptOf[fromReply].ParentSpanID]
	require.Equal(t, telemetry.SpanSubmitSubtasks, submitSpan.Name, "the reply's subtask hangs under its submission")
	require.Equal(t, step.SpanID, submitSpan.ParentSpanID, "which is under the step")
	require.Equal(t, telemetry.StepSpanID(telemetry.SubtasksKey(key)).String(), submitSpan.SpanID)
	require.Equal(t, int64(1), submitSpan.Attrs[telemetry.AttrSubtaskCount])

	require.Equal(t, step.SpanID, attemptOf[viaAPI.ID].ParentSpanID, "the API child with the step's traceparent hangs under the step")
	require.Empty(t, attemptOf[foreign.ID].ParentSpanID, "another trace's span is not followed: the child is a root of the run's trace")
}

// A fork's attempt span names the task and step it was forked from and
// links to the source's last attempt, in the source run's trace.
func TestTraceForkLinksToSource(t *testing.T) {
	t.Parallel()
	b := setupTraced(t, telemetry.Config{})
	cmd, _ := writeScript(t, stepOf+`if [ "$step" = 2 ]; then
  echo '{"status":"finish","output":"two steps"}'
else
  echo '{"status":"continue","output":1}'
fi
`)
	b.start(t, newExecAgent(t, ExecConfig{Command: cmd}))
	ctx := context.Background()
	// Under a caller's span, so that the source's attempt is a child, whose
	// span id errand's provider derives.
	src := b.waitEnd(t, submit(t, b.bundle, &engine.SubmitParams{Goal: "count",
		Metadata: telemetry.WithTraceparent(nil, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}).ID)
	require.Equal(t, store.StatusCompleted, src.Status)
	fork, err := b.engine.Fork(ctx, &engine.ForkParams{TaskID: src.ID, FromStep: 2})
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, b.waitEnd(t, fork.ID).Status)

	spans := b.flush(t)
	var srcAttempt, forkAttempt telemetrytest.Span
	for _, s := range spans {
		if s.Name != telemetry.SpanAttempt {
			continue
		}
		switch s.Attrs[telemetry.AttrTaskID] {
		case src.ID:
			srcAttempt = s
		case fork.ID:
			forkAttempt = s
		}
	}
	require.Equal(t, telemetry.AttemptSpanID(src.ID, src.LeaseToken).String(), srcAttempt.SpanID)
	require.Equal(t, src.ID, forkAttempt.Attrs[telemetry.AttrForkSource])
	require.Equal(t, int64(2), forkAttempt.Attrs[telemetry.AttrForkFromStep])
	links := forkAttempt.Raw.GetLinks()
	require.Len(t, links, 1)
	require.Equal(t, srcAttempt.TraceID, hex.EncodeToString(links[0].GetTraceId()), "the source run's trace")
	require.Equal(t, srcAttempt.SpanID, hex.EncodeToString(links[0].GetSpanId()), "the source's last attempt")
	linkAttrs := map[string]any{}
	for _, kv := range links[0].GetAttributes() {
		switch v := kv.GetValue(); {
		case v.GetStringValue() != "":
			linkAttrs[kv.GetKey()] = v.GetStringValue()
		default:
			linkAttrs[kv.GetKey()] = v.GetIntValue()
		}
	}
	require.Equal(t, map[string]any{telemetry.AttrForkSource: src.ID, telemetry.AttrForkFromStep: int64(2)}, linkAttrs)
	// The fork copied the source's metadata, traceparent included: its
	// run is another child of the same caller.
	require.Equal(t, srcAttempt.TraceID, forkAttempt.TraceID)
}

// Sampled out, an exec step gets no TRACEPARENT, and its subtasks make no
// span.
func TestTraceExecSampledOut(t *testing.T) {
	t.Parallel()
	zero := 0.0
	b := setupTraced(t, telemetry.Config{SampleRatio: &zero})
	cmd, _ := writeScript(t, subtaskScript)
	b.startAgents(t, map[string]taskrun.Handler{"default": newExecAgent(t, ExecConfig{Command: cmd}), "charter": quickAgent})
	task := submit(t, b.bundle, &engine.SubmitParams{Goal: "chart Q3"})
	require.Equal(t, store.StatusCompleted, b.waitEnd(t, task.ID).Status)
	recs := steps(t, b.bundle, task.ID)
	require.JSONEq(t, `{"traceparent":""}`, string(mustField(t, recs[0].Output, "output")))
	require.Empty(t, b.flush(t))
	require.Zero(t, b.receiver.Requests())
}

func mustField(t *testing.T, raw json.RawMessage, name string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &m), string(raw))
	return m[name]
}
