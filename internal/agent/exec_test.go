//go:build unix

package agent

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/engine"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// stepOf is the shell that sets $input (stdin) and $step (step.number).
const stepOf = `input=$(cat)
step=$(printf '%s\n' "$input" | sed -n 's/.*"step":{"number":\([0-9][0-9]*\).*/\1/p')
`

// writeScript writes a POSIX sh agent into a fresh directory and returns
// the command that runs it (through sh, so that a file just written is
// never exec'd while a concurrent fork still holds it open) and the
// directory, which the script sees as $RUN_DIR.
func writeScript(t *testing.T, body string) (cmd []string, dir string) {
	t.Helper()
	dir = t.TempDir()
	path := filepath.Join(dir, "agent.sh")
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\nset -eu\n"+body), 0o755))
	return []string{"/bin/sh", path}, dir
}

func newExecAgent(t *testing.T, cfg ExecConfig) *Exec {
	t.Helper()
	a, err := NewExec(cfg)
	require.NoError(t, err)
	return a
}

func submit(t *testing.T, b *bundle, p *engine.SubmitParams) *store.Task {
	t.Helper()
	task, err := b.engine.Submit(context.Background(), p)
	require.NoError(t, err)
	return task
}

func steps(t *testing.T, b *bundle, taskID string) []*store.Step {
	t.Helper()
	s, err := b.engine.Steps(context.Background(), taskID)
	require.NoError(t, err)
	return s
}

// readLines reads a file of lines the scripts append to.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.Fields(string(b))
}

func TestNewExec(t *testing.T) {
	t.Parallel()
	_, err := NewExec(ExecConfig{})
	require.ErrorContains(t, err, "command is required")
	_, err = NewExec(ExecConfig{Command: []string{""}})
	require.ErrorContains(t, err, "command is required")
	_, err = NewExec(ExecConfig{Command: []string{"x"}, StepTimeout: -time.Second})
	require.Error(t, err)
	a, err := NewExec(ExecConfig{Command: []string{"x"}})
	require.NoError(t, err)
	require.Equal(t, DefaultMaxSteps, a.cfg.MaxSteps)
	require.Equal(t, DefaultStepTimeout, a.cfg.StepTimeout)
}

// The example agent runs a three-step task end to end.
func TestExecShellAgentExample(t *testing.T) {
	t.Parallel()
	b := setup(t)
	script, err := filepath.Abs("../../examples/agents/shell-agent.sh")
	require.NoError(t, err)
	b.start(t, newExecAgent(t, ExecConfig{Command: []string{script}}))
	task := submit(t, b, &engine.SubmitParams{Goal: `Summarize "the week" & plan the next`})

	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
	require.JSONEq(t, `{"output":"Finished: Summarize \"the week\" & plan the next","warning":null}`, string(done.Result))
	require.Equal(t, &store.Progress{CurrentStep: 3, TotalSteps: 3, Label: "done", Percentage: 100}, done.Progress)
	require.Equal(t, 3, done.Consumed.ToolCalls)

	got := steps(t, b, task.ID)
	require.Len(t, got, 3)
	for i, st := range got {
		n := i + 1
		require.Equal(t, n, st.StepNo)
		require.Equal(t, taskrun.StepToolCall, st.Type)
		require.Equal(t, "exec", st.Tool)
		require.Equal(t, taskrun.StepDone, st.Status)
		require.Equal(t, taskrun.StepKey(task.ID, n, 0), st.IdempotencyKey)
		var in struct {
			Step struct {
				Number         int    `json:"number"`
				IdempotencyKey string `json:"idempotency_key"`
			} `json:"step"`
		}
		require.NoError(t, json.Unmarshal(st.Input, &in), "the step's input is the stdin document")
		require.Equal(t, n, in.Step.Number)
		require.Equal(t, st.IdempotencyKey, in.Step.IdempotencyKey)
	}
	require.JSONEq(t, `{"status":"continue","output":{"step":1,"note":"gathered notes"},`+
		`"progress":{"current":1,"total":3,"label":"gathering"}}`, string(got[0].Output))

	// The finish step leaves the checkpoint after step 2, so that a lost
	// completion replays the finish instead of running a step 4.
	state, err := LoadState(done.Checkpoint, done.Goal)
	require.NoError(t, err)
	require.Equal(t, 2, state.Step)
	require.JSONEq(t, `{"step":2,"note":"wrote a draft"}`, string(state.PartialResult))
	require.Len(t, state.StepsLog, 2)
}

// The stdin document, environment and working directory a command gets.
func TestExecStdinDocument(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cmd, dir := writeScript(t, stepOf+`printf '%s' "$input" > "$RUN_DIR/stdin.$step"
printf '%s %s %s %s %s\n' "$ERRAND_TASK_ID" "$ERRAND_STEP_NUMBER" "$ERRAND_IDEMPOTENCY_KEY" "$GREETING" "$(pwd)" > "$RUN_DIR/env.$step"
if [ "$step" = 1 ]; then
	echo '{"status":"continue","output":{"found":[1,2]},"ignored_field":true}'
else
	echo '{"status":"finish","output":"ok"}'
fi
`)
	work := t.TempDir()
	b.start(t, newExecAgent(t, ExecConfig{
		Command: cmd, WorkDir: work, Env: map[string]string{"RUN_DIR": dir, "GREETING": "hello"},
	}))
	task := submit(t, b, &engine.SubmitParams{Goal: "Count <things>", Title: "Counting", Input: json.RawMessage(`{"limit": 3}`)})
	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
	// Without progress in the result, progress is the step of max_steps.
	require.Equal(t, &store.Progress{CurrentStep: 2, TotalSteps: DefaultMaxSteps, Percentage: 10}, done.Progress)

	first, err := os.ReadFile(filepath.Join(dir, "stdin.1"))
	require.NoError(t, err)
	require.Contains(t, string(first), `"goal":"Count <things>"`, "no HTML escaping")
	require.JSONEq(t, `{
		"task": {"id": "`+task.ID+`", "goal": "Count <things>", "title": "Counting", "input": {"limit": 3},
			"agent": "default", "attempt": 1},
		"state": {"schema_version": 1, "goal": "Count <things>", "step": 0, "partial_result": null,
			"steps_log": [], "answers": [], "subtask_results": {}, "subtask_failures": {}},
		"step": {"number": 1, "idempotency_key": "`+task.ID+`:1:0"}
	}`, string(first))

	second, err := os.ReadFile(filepath.Join(dir, "stdin.2"))
	require.NoError(t, err)
	var doc struct {
		State TaskState `json:"state"`
		Step  struct {
			Number int `json:"number"`
		} `json:"step"`
	}
	require.NoError(t, json.Unmarshal(second, &doc))
	require.Equal(t, 2, doc.Step.Number)
	require.Equal(t, 1, doc.State.Step)
	require.JSONEq(t, `{"found":[1,2]}`, string(doc.State.PartialResult), "partial_result is the previous step's output")
	require.Equal(t, []StepLog{{Step: 1, Summary: `continue: {"found":[1,2]}`}}, doc.State.StepsLog)

	env := readLines(t, filepath.Join(dir, "env.2"))
	realWork, err := filepath.EvalSymlinks(work)
	require.NoError(t, err)
	require.Equal(t, []string{task.ID, "2", task.ID + ":2:0", "hello", realWork}, env)
}

// The worker dies while step 2's command runs; a fresh pool resumes the
// task at step 2: step 1, recorded done, does not run again.
func TestExecResumesWithoutRerunningDoneSteps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cmd, dir := writeScript(t, stepOf+`echo "$step" >> "$RUN_DIR/runs"
if [ "$step" = 2 ] && [ "$(grep -c '^2$' "$RUN_DIR/runs")" = 1 ]; then
	echo in-step-2 > "$RUN_DIR/fifo"   # tell the test, then block until killed
	sleep 1000 &
	wait
fi
if [ "$step" = 3 ]; then
	printf '{"status":"finish","output":"done after %s steps"}\n' "$step"
else
	printf '{"status":"continue","output":%s}\n' "$step"
fi
`)
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	agent := newExecAgent(t, ExecConfig{Command: cmd, Env: map[string]string{"RUN_DIR": dir}})

	kill := b.startDoomed(t, agent)
	task := submit(t, b, &engine.SubmitParams{Goal: "three steps"})

	inStep2 := make(chan error, 1)
	go func() {
		_, err := os.ReadFile(fifo) // returns once the script has written
		inStep2 <- err
	}()
	select {
	case err := <-inStep2:
		require.NoError(t, err)
	case <-time.After(waitTimeout):
		t.Fatal("step 2 never started")
	}
	kill() // the worker dies mid-step

	b.start(t, agent)
	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
	require.JSONEq(t, `{"output":"done after 3 steps","warning":null}`, string(done.Result))
	require.Equal(t, []string{"1", "2", "2", "3"}, readLines(t, filepath.Join(dir, "runs")), "step 1 ran exactly once")
	require.Equal(t, 1, done.Attempt, "a shutdown's interrupted attempt does not count")

	got := steps(t, b, task.ID)
	require.Len(t, got, 3)
	for _, st := range got {
		require.Equal(t, taskrun.StepDone, st.Status)
	}
}

func TestExecFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		script      string
		maxAttempts int
		wantStatus  store.Status
		wantCode    string
		wantMessage []string
	}{
		{
			name:        "non-zero exit",
			script:      "echo 'boom: the disk is on fire' >&2\nexit 3\n",
			maxAttempts: 1,
			wantStatus:  store.StatusFailed,
			wantCode:    CodeExecError,
			wantMessage: []string{"exit status 3", "the disk is on fire"},
		},
		{
			name:        "malformed stdout",
			script:      "echo 'all good!'\n",
			maxAttempts: 1,
			wantStatus:  store.StatusFailed,
			wantCode:    CodeExecError,
			wantMessage: []string{"not a step result", `"all good!"`},
		},
		{
			name:        "unknown status",
			script:      `echo '{"status":"done"}'` + "\n",
			maxAttempts: 1,
			wantStatus:  store.StatusFailed,
			wantCode:    CodeExecError,
			wantMessage: []string{`status "done"`},
		},
		{
			name:        "exec error is retryable",
			script:      "exit 1\n",
			wantStatus:  store.StatusRetryScheduled,
			wantCode:    CodeExecError,
			wantMessage: []string{"exit status 1"},
		},
		{
			name:        "status error, not retryable",
			script:      `echo '{"status":"error","error":"no such customer","retryable":false}'` + "\n",
			wantStatus:  store.StatusFailed,
			wantCode:    "agent_error",
			wantMessage: []string{"no such customer"},
		},
		{
			name:        "status error, retryable",
			script:      `echo '{"status":"error","error":"rate limited","retryable":true}'` + "\n",
			wantStatus:  store.StatusRetryScheduled,
			wantCode:    "agent_error",
			wantMessage: []string{"rate limited"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			cmd, _ := writeScript(t, tt.script)
			b.start(t, newExecAgent(t, ExecConfig{Command: cmd}))
			task := submit(t, b, &engine.SubmitParams{Goal: "fail", MaxAttempts: tt.maxAttempts})

			done := b.waitEnd(t, task.ID)
			require.Equal(t, tt.wantStatus, done.Status)
			require.NotNil(t, done.Error)
			require.Equal(t, tt.wantCode, done.Error.Code)
			got := steps(t, b, task.ID)
			require.Len(t, got, 1)
			require.Equal(t, taskrun.StepFailed, got[0].Status)
			require.Equal(t, tt.wantCode, got[0].ErrorCode)
			for _, m := range tt.wantMessage {
				require.Contains(t, done.Error.Message, m)
				require.Contains(t, got[0].ErrorMessage, m)
			}
		})
	}
}

// A step past its timeout has its whole process group killed, is recorded
// failed with step_timeout, and the task is retried later.
func TestExecStepTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cmd, dir := writeScript(t, `sleep 10 &
echo $! > "$RUN_DIR/child"
wait
`)
	b.start(t, newExecAgent(t, ExecConfig{Command: cmd, StepTimeout: 200 * time.Millisecond, Env: map[string]string{"RUN_DIR": dir}}))
	task := submit(t, b, &engine.SubmitParams{Goal: "too slow"})

	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusRetryScheduled, done.Status)
	require.Equal(t, CodeExecTimeout, done.Error.Code)
	require.Contains(t, done.Error.Message, "200ms timeout")
	got := steps(t, b, task.ID)
	require.Len(t, got, 1)
	require.Equal(t, taskrun.StepFailed, got[0].Status)
	require.Equal(t, CodeExecTimeout, got[0].ErrorCode)
	// The background sleep held stdout open: had only the shell been
	// killed, the step would have waited ExecWaitDelay for the pipe.
	require.Less(t, got[0].DurationMS, ExecWaitDelay.Milliseconds())

	// And the sleep is gone (it closed its stdout, so it has exited; it may
	// linger as a zombie until its new parent reaps it).
	lines := readLines(t, filepath.Join(dir, "child"))
	require.Len(t, lines, 1)
	pid, err := strconv.Atoi(lines[0])
	require.NoError(t, err)
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		return // reaped
	}
	require.NoError(t, err)
	fields := strings.Fields(string(stat))
	if fields[1] == "(sleep)" {
		require.Contains(t, []string{"Z", "X"}, fields[2], "the sleep still runs: %s", stat)
	}
}

// failFirstDone loses the first write that ends a step done: the step's
// command ran and its subtasks were submitted, but the record says
// otherwise, so the next attempt runs the step again.
type failFirstDone struct {
	taskrun.Run
	failed *atomic.Bool
}

func (r failFirstDone) EndStep(ctx context.Context, key string, res taskrun.StepResult) error {
	if res.Status == taskrun.StepDone && r.failed.CompareAndSwap(false, true) {
		return errors.New("injected: the step record was lost")
	}
	return r.Run.EndStep(ctx, key, res)
}

// Subtasks a step asks for are submitted once, even when the step runs
// again, and are the task's children.
func TestExecSubmitsSubtasksOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cmd, dir := writeScript(t, stepOf+`echo "$step" >> "$RUN_DIR/runs"
if [ "$step" = 1 ]; then
	echo '{"status":"continue","output":"split","subtasks":[{"goal":"fetch A","agent":"worker","priority":7},{"goal":"fetch B","agent":"worker","title":"B"}]}'
else
	printf '%s' "$input" > "$RUN_DIR/stdin.2"
	echo '{"status":"finish","output":"merged"}'
fi
`)
	agent := newExecAgent(t, ExecConfig{Command: cmd, Env: map[string]string{"RUN_DIR": dir}})
	var failed atomic.Bool
	// The children's agent completes them while the task waits.
	b.startAgents(t, map[string]taskrun.Handler{
		"default": taskrun.HandlerFunc(func(ctx context.Context, run taskrun.Run) (taskrun.Result, error) {
			return agent.Handle(ctx, failFirstDone{Run: run, failed: &failed})
		}),
		"worker": quickAgent,
	})
	task := submit(t, b, &engine.SubmitParams{Goal: "split the work"})

	retry := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusRetryScheduled, retry.Status, "%+v", retry.Error)
	require.Contains(t, retry.Error.Message, "injected")
	b.clock.Advance(engine.DefaultBackoffCap)
	done := b.waitEnd(t, task.ID, store.EventTaskCompleted)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
	require.Equal(t, []string{"1", "1", "2"}, readLines(t, filepath.Join(dir, "runs")), "step 1 ran twice")

	page, err := b.engine.List(context.Background(), &engine.ListParams{ParentID: task.ID})
	require.NoError(t, err)
	require.Len(t, page.Tasks, 2, "submitted once")
	children := page.Tasks
	slices.SortFunc(children, func(x, y *store.Task) int { return strings.Compare(x.Goal, y.Goal) })
	require.Equal(t, "fetch A", children[0].Goal)
	require.Equal(t, 7, children[0].Priority)
	require.Equal(t, "B", children[1].Title)
	for _, c := range children {
		require.Equal(t, task.ID, c.ParentID)
		require.Equal(t, "worker", c.Agent)
		require.Equal(t, store.StatusCompleted, c.Status, "the task waited for its children")
	}

	// The step record names the children, in order, and so does the log
	// the next step sees.
	got := steps(t, b, task.ID)
	var out execReply
	require.NoError(t, json.Unmarshal(got[0].Output, &out))
	require.Equal(t, []string{children[0].ID, children[1].ID}, out.SubtaskIDs)
	stdin2, err := os.ReadFile(filepath.Join(dir, "stdin.2"))
	require.NoError(t, err)
	require.Contains(t, string(stdin2), "subtasks "+children[0].ID+", "+children[1].ID)
	require.Contains(t, string(stdin2), `"subtask_results":{`, "step 2 sees the children's results")
	require.Contains(t, string(stdin2), `done: fetch A`)
}

func TestExecMaxStepsAndAskUser(t *testing.T) {
	t.Parallel()
	t.Run("max steps", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cmd, _ := writeScript(t, stepOf+`printf '{"status":"continue","output":%s}\n' "$step"`+"\n")
		b.start(t, newExecAgent(t, ExecConfig{Command: cmd, MaxSteps: 2}))
		task := submit(t, b, &engine.SubmitParams{Goal: "never ends"})
		done := b.waitEnd(t, task.ID)
		require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
		require.JSONEq(t, `{"output":2,"warning":"max_steps_reached"}`, string(done.Result))
		require.Equal(t, &store.Progress{CurrentStep: 2, TotalSteps: 2, Percentage: 100}, done.Progress)
		require.Len(t, steps(t, b, task.ID), 2)
	})
	t.Run("ask_user", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cmd, _ := writeScript(t, stepOf+`if [ "$step" = 1 ]; then
  echo '{"status":"ask_user","question":"Which city?"}'
else
  case "$input" in
    *'"answer":"Paris"'*) echo '{"status":"finish","output":"sunny in Paris"}' ;;
    *) echo '{"status":"error","error":"the answer is missing"}' ;;
  esac
fi
`)
		b.start(t, newExecAgent(t, ExecConfig{Command: cmd}))
		task := submit(t, b, &engine.SubmitParams{Goal: "weather"})
		waiting := b.waitEnd(t, task.ID, store.EventTaskInputRequired)
		require.Equal(t, store.StatusInputRequired, waiting.Status)
		pending, err := b.engine.PendingInputs(context.Background())
		require.NoError(t, err)
		require.Len(t, pending, 1)
		require.Equal(t, "Which city?", pending[0].Question)

		_, err = b.engine.Answer(context.Background(), task.ID, "Paris", "")
		require.NoError(t, err)
		done := b.waitEnd(t, task.ID, store.EventTaskCompleted, store.EventTaskFailed)
		require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
		require.JSONEq(t, `{"output":"sunny in Paris","warning":null}`, string(done.Result))
		got := steps(t, b, task.ID)
		require.Len(t, got, 2)
		require.JSONEq(t, `{"status":"ask_user","question":"Which city?"}`, string(got[0].Output))

		_, err = b.engine.Answer(context.Background(), pending[0].ID, "again", "")
		require.ErrorIs(t, err, store.ErrInputClosed)
	})
}

// When a finish step is recorded but the task's completion is lost, the
// next attempt replays the recorded result: the command does not run again,
// nor for a step after the last.
func TestExecReplaysRecordedFinish(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cmd, dir := writeScript(t, stepOf+`echo "$step" >> "$RUN_DIR/runs"
if [ "$step" = 1 ]; then
	echo '{"status":"continue","output":"half"}'
else
	echo '{"status":"finish","output":{"answer":42}}'
fi
`)
	agent := newExecAgent(t, ExecConfig{Command: cmd, Env: map[string]string{"RUN_DIR": dir}})
	var lost atomic.Bool
	b.start(t, taskrun.HandlerFunc(func(ctx context.Context, run taskrun.Run) (taskrun.Result, error) {
		res, err := agent.Handle(ctx, run)
		if err == nil && lost.CompareAndSwap(false, true) {
			return taskrun.Result{}, errors.New("injected: the completion was lost")
		}
		return res, err
	}))
	task := submit(t, b, &engine.SubmitParams{Goal: "answer"})

	retry := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusRetryScheduled, retry.Status, "%+v", retry.Error)
	b.clock.Advance(engine.DefaultBackoffCap)
	done := b.waitEnd(t, task.ID, store.EventTaskCompleted)
	require.Equal(t, store.StatusCompleted, done.Status, "%+v", done.Error)
	require.JSONEq(t, `{"output":{"answer":42},"warning":null}`, string(done.Result))
	require.Equal(t, 2, done.Attempt)
	require.Equal(t, []string{"1", "2"}, readLines(t, filepath.Join(dir, "runs")), "each step ran once")
	require.Len(t, steps(t, b, task.ID), 2)
}

// Cancelling a task kills the process group of the step that runs.
func TestExecCancelKillsProcessGroup(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cmd, dir := writeScript(t, `echo running > "$RUN_DIR/fifo"
sleep 1000 &
wait
`)
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	b.start(t, newExecAgent(t, ExecConfig{Command: cmd, Env: map[string]string{"RUN_DIR": dir}}))
	task := submit(t, b, &engine.SubmitParams{Goal: "long"})

	running := make(chan error, 1)
	go func() {
		_, err := os.ReadFile(fifo)
		running <- err
	}()
	select {
	case err := <-running:
		require.NoError(t, err)
	case <-time.After(waitTimeout):
		t.Fatal("the step never started")
	}
	_, err := b.engine.Cancel(context.Background(), task.ID, "changed my mind", "")
	require.NoError(t, err)

	done := b.waitEnd(t, task.ID, store.EventTaskCancelled)
	require.Equal(t, store.StatusCancelled, done.Status)
	got := steps(t, b, task.ID)
	require.Len(t, got, 1)
	require.Equal(t, taskrun.StepFailed, got[0].Status)
	require.Equal(t, CodeExecInterrupted, got[0].ErrorCode)
	// The background sleep held stdout: the step ended at once only
	// because the whole group was killed.
	require.Less(t, got[0].DurationMS, ExecWaitDelay.Milliseconds())
}

func FuzzParseExecReply(f *testing.F) {
	for _, seed := range []string{
		`{"status":"continue","output":{"a":1},"progress":{"current":1,"total":3,"label":"x"}}`,
		`{"status":"finish","output":"done","subtasks":[{"goal":"g","agent":"a","priority":3,"depends_on":["t"]}]}`,
		`{"status":"ask_user","question":"why?"}`,
		`{"status":"error","error":"e","retryable":true,"extra":[1,2]}`,
		`{"status":"continue","subtask_ids":["forged"]}`,
		``, `null`, `[]`, `{"status":1}`, `{} {}`, "\xff",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		r, err := parseExecReply(out)
		if err != nil {
			require.Nil(t, r)
			return
		}
		require.Contains(t, []string{ExecContinue, ExecFinish, ExecAskUser, ExecError}, r.Status)
		require.Empty(t, r.SubtaskIDs, "the agent cannot claim subtasks were made")
		if r.Status == ExecAskUser {
			require.NotEmpty(t, strings.TrimSpace(r.Question))
		}
		// What is recorded can be read back the same way on replay.
		b, err := json.Marshal(r)
		require.NoError(t, err)
		var back execReply
		require.NoError(t, json.Unmarshal(b, &back))
	})
}

// An exec agent's steps are tool calls: a budget of two stops the third.
func TestExecToolCallBudget(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cmd, _ := writeScript(t, stepOf+`printf '{"status":"continue","output":%s}\n' "$step"`+"\n")
	b.start(t, newExecAgent(t, ExecConfig{Command: cmd}))
	task := submit(t, b, &engine.SubmitParams{Goal: "g", Budget: &store.Budget{MaxToolCalls: 2}})
	done := b.waitEnd(t, task.ID)
	require.Equal(t, store.StatusFailed, done.Status)
	require.Equal(t, taskrun.CodeBudgetExceeded, done.Error.Code)
	require.Equal(t, 2, done.Consumed.ToolCalls)
	require.Equal(t, &store.Amount{}, done.Reserved)
	got := steps(t, b, task.ID)
	require.Len(t, got, 3)
	require.Equal(t, taskrun.StepDenied, got[2].Status)
}
