package agent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/internal/telemetry"
)

// Limits of one exec step.
const (
	// MaxExecStdout bounds the step result an exec agent may print; a
	// longer stdout is an exec_error.
	MaxExecStdout = 4 << 20
	// ExecStderrTail is how much of the end of stderr, less its live output
	// lines (see MaxExecOutputLine), is kept: it becomes the message of a
	// failed step.
	ExecStderrTail = 64 << 10
	// ExecWaitDelay is how long a step waits, once its process has exited
	// or been killed, for stdout and stderr to close (a background child may
	// hold them open) before they are closed on it.
	ExecWaitDelay = 5 * time.Second
)

// Error codes of exec agents. The timeout code is the one every agent uses
// for a step that ran past its step timeout.
const (
	CodeExecError    = "exec_error"
	CodeExecTimeout  = "step_timeout"
	CodeSubtaskError = "subtask_error"
	// CodeMemoryError is the code of an exec step whose memories could not
	// be stored.
	CodeMemoryError = "memory_error"
	// CodeExecInterrupted marks the record of a step whose command was
	// killed because the task was cancelled, its lease lost, or the engine
	// stopped; the task's outcome is then the engine's to decide.
	CodeExecInterrupted = "interrupted"
)

// Statuses of an exec step result.
const (
	ExecContinue = "continue"
	ExecFinish   = "finish"
	ExecAskUser  = "ask_user"
	ExecError    = "error"
)

// execTool is the tool name of an exec step record.
const execTool = "exec"

// execTaskErrorTail bounds the stderr quoted in a task's error; the step
// record keeps the whole ExecStderrTail.
const execTaskErrorTail = 2 << 10

// ExecConfig configures an exec agent.
type ExecConfig struct {
	// Command is the program to run for each step and its arguments;
	// required. A program without a slash is looked up in PATH; a relative
	// path with one is resolved against WorkDir.
	Command []string
	// Env is added to the daemon's environment for the command; it wins
	// over a variable of the same name.
	Env map[string]string
	// WorkDir is the command's working directory; empty means the daemon's.
	WorkDir string
	// MaxSteps bounds the loop (default 20); at the limit the task completes
	// with its last partial result and the max_steps_reached warning.
	MaxSteps int
	// StepTimeout bounds one run of the command (default 120s); past it the
	// process group is killed and the attempt ends with the retryable
	// step_timeout error.
	StepTimeout time.Duration
}

// Exec is the exec agent: it runs a configured command once per step,
// writing the task, its state and the step's idempotency key as JSON on
// stdin and reading the step's result as JSON from stdout, so agents can
// be written in any language. docs/exec-protocol.md is the protocol.
//
// Each run of the command is a tool_call step record (tool "exec") whose
// input is the stdin document and whose output is the stdout document. The
// state after a "continue" step is checkpointed with the step's record, in
// one transaction, so a resumed task starts at the next step and a step that
// was recorded done never runs again. A "finish" (or "ask_user") step
// leaves the checkpoint where it was: if the task's completion is lost, the
// next attempt replays the recorded result instead of running the command
// for a step after the last.
type Exec struct {
	cfg ExecConfig
}

var _ taskrun.Handler = (*Exec)(nil)

// NewExec returns an exec agent.
func NewExec(cfg ExecConfig) (*Exec, error) {
	if len(cfg.Command) == 0 || cfg.Command[0] == "" {
		return nil, errors.New("exec agent: a command is required")
	}
	if cfg.MaxSteps < 0 {
		return nil, fmt.Errorf("exec agent: max steps %d: must not be negative", cfg.MaxSteps)
	}
	if cfg.StepTimeout < 0 {
		return nil, fmt.Errorf("exec agent: step timeout %s: must not be negative", cfg.StepTimeout)
	}
	cfg.Command = slices.Clone(cfg.Command)
	cfg.Env = maps.Clone(cfg.Env)
	cfg.MaxSteps = cmp.Or(cfg.MaxSteps, DefaultMaxSteps)
	cfg.StepTimeout = cmp.Or(cfg.StepTimeout, DefaultStepTimeout)
	return &Exec{cfg: cfg}, nil
}

// Handle runs the command step by step until it finishes, fails, or
// reaches MaxSteps.
func (a *Exec) Handle(ctx context.Context, run taskrun.Run) (taskrun.Result, error) {
	info := run.Task()
	state, err := LoadState(info.Checkpoint, info.Goal)
	if err != nil {
		return taskrun.Result{}, &taskrun.Error{Code: "bad_checkpoint", Err: err}
	}
	if _, err := awaitAnswer(ctx, run, state); err != nil {
		return taskrun.Result{}, err
	}
	if _, err := collectSubtasks(ctx, run, state); err != nil {
		return taskrun.Result{}, err
	}
	for {
		if run.PauseRequested() {
			return taskrun.Result{}, taskrun.Paused{} // between steps: the checkpoint holds
		}
		n := state.Step + 1
		if n > a.cfg.MaxSteps {
			warning := WarningMaxSteps
			return taskrun.Result{Output: state.PartialResult, Warning: &warning}, nil
		}
		if err := run.Renew(ctx); err != nil {
			return taskrun.Result{}, err
		}
		result, finished, err := a.step(ctx, run, state, n)
		if err != nil || finished {
			return result, err
		}
	}
}

// step runs step n, or replays it when an earlier attempt recorded it
// done (runStep), works out what its reply does to the state (applyReply),
// records it (commitStep) and reports how far the task is.
func (a *Exec) step(ctx context.Context, run taskrun.Run, state *TaskState, n int) (taskrun.Result, bool, error) {
	info := run.Task()
	key := taskrun.StepKey(info.ID, n, 0)
	stdin, err := execInput(info, state, n, key)
	if err != nil {
		return taskrun.Result{}, false, err
	}
	step, err := taskrun.BeginStep(ctx, run, taskrun.StepSpec{Number: n, Type: taskrun.StepToolCall, Tool: execTool, Input: stdin})
	if err != nil {
		return taskrun.Result{}, false, err
	}
	reply, err := a.runStep(ctx, run, step, info, n, stdin)
	if err != nil {
		return taskrun.Result{}, false, err
	}
	o, err := applyReply(state, n, reply)
	if err != nil {
		return taskrun.Result{}, false, err
	}
	if err := commitStep(ctx, step, reply, o); err != nil {
		return taskrun.Result{}, false, err
	}
	if o.next != nil {
		*state = *o.next
	}
	if _, asks := o.stop.(*taskrun.InputNeeded); asks && step.Replayed() {
		// Asked and answered before: a fork's copied question.
		_, took, err := takeAnswer(ctx, run, state)
		if err != nil {
			return taskrun.Result{}, false, err
		}
		if took {
			o.stop = nil
		}
	}
	if o.stop != nil {
		return taskrun.Result{}, false, o.stop
	}
	p := taskrun.Progress{}
	if reply.Progress != nil {
		p = taskrun.Progress{Current: reply.Progress.Current, Total: reply.Progress.Total, Label: reply.Progress.Label}
	} else {
		p.Current, p.Total, p.Label = state.Progress(a.cfg.MaxSteps)
	}
	if err := run.Progress(ctx, p); err != nil {
		return taskrun.Result{}, false, err
	}
	if state.AwaitingSubtasks {
		return taskrun.Result{}, false, taskrun.WaitSubtasks{}
	}
	if o.finished {
		out := reply.Output
		if len(out) == 0 {
			out = json.RawMessage(`null`)
		}
		return taskrun.Result{Output: out}, true, nil
	}
	return taskrun.Result{}, false, nil
}

// execOutcome is what a step's reply does: the record that ends the step
// (its output the reply), the state after it, and how the attempt goes on.
type execOutcome struct {
	res taskrun.StepResult
	// next is the state after the step; nil leaves it as it was.
	next *TaskState
	// stop, when set, ends the attempt once the step is recorded.
	stop     error
	finished bool
}

// runStep replays the reply an earlier attempt recorded for step, or runs
// the command for it, then submits the subtasks and memories a continue or
// finish reply asks for. A run that fails is recorded failed and ends the
// attempt.
func (a *Exec) runStep(ctx context.Context, run taskrun.Run, step *taskrun.Step, info *taskrun.Info, n int, stdin []byte) (*execReply, error) {
	var reply *execReply
	if step.Replayed() {
		reply = new(execReply)
		if err := json.Unmarshal(step.Record().Output, reply); err != nil {
			return nil, &taskrun.Error{Code: "bad_step_record", Err: fmt.Errorf("step %d: %w", n, err)}
		}
	} else {
		var err error
		if reply, err = a.runCommand(ctx, step, info, n, stdin, stepTraceparent(ctx, run, step.Key())); err != nil {
			return nil, err
		}
	}
	if reply.Status != ExecContinue && reply.Status != ExecFinish {
		return reply, nil
	}
	if code, err := a.submit(ctx, run, step.Key(), reply); err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		_ = step.End(ctx, taskrun.StepResult{Status: taskrun.StepFailed, ErrorCode: code, ErrorMessage: err.Error()})
		return nil, &taskrun.Error{Code: code, Err: err, Retryable: true}
	}
	return reply, nil
}

// runCommand runs the command for step. A run of the command is a tool
// call: with a budget that limits tool calls or wall clock, it is reserved
// first, and refused past them.
func (a *Exec) runCommand(ctx context.Context, step *taskrun.Step, info *taskrun.Info, n int, stdin []byte, traceparent string) (*execReply, error) {
	if b := info.Budget; b.MaxToolCalls > 0 || b.MaxWallClock > 0 {
		var amount taskrun.Amount
		if b.MaxToolCalls > 0 {
			amount.ToolCalls = 1
		}
		if err := step.Reserve(ctx, amount, taskrun.StepDenied); err != nil {
			return nil, err
		}
	}
	reply, fail := a.command(ctx, info, n, step.Key(), traceparent, stdin, step.Output)
	if fail != nil {
		// Recorded even when ctx is done, so the record says why the step
		// stopped.
		_ = step.End(ctx, taskrun.StepResult{Status: taskrun.StepFailed, ErrorCode: fail.code, ErrorMessage: fail.stepMessage()})
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, &taskrun.Error{Code: fail.code, Err: fail, Retryable: true}
	}
	return reply, nil
}

// applyReply works out what step n's reply does to state. A continue or
// ask_user step advances the state, which its record checkpoints: the
// task resumes at the next step (ask_user with the question pending, so
// the next step sees the answer in state.answers; should the wait itself
// be lost, the resumed task asks again). A finish step leaves the
// checkpoint where it was.
func applyReply(state *TaskState, n int, reply *execReply) (execOutcome, error) {
	if reply.Status == ExecError {
		msg := cmp.Or(reply.Error, "the agent reported an error without a message")
		return execOutcome{
			res:  taskrun.StepResult{Status: taskrun.StepFailed, ErrorCode: taskrun.DefaultErrorCode, ErrorMessage: msg},
			stop: &taskrun.Error{Code: taskrun.DefaultErrorCode, Err: fmt.Errorf("step %d: %s", n, msg), Retryable: reply.Retryable},
		}, nil
	}
	next := *state
	next.Step = n
	next.StepsLog = append(slices.DeleteFunc(slices.Clone(state.StepsLog), func(l StepLog) bool { return l.Step >= n }),
		StepLog{Step: n, Summary: execSummary(reply)})
	o := execOutcome{res: taskrun.StepResult{Status: taskrun.StepDone}, next: &next}
	if reply.Status == ExecAskUser {
		next.PendingQuestion = reply.Question
		o.stop = &taskrun.InputNeeded{Question: reply.Question}
	} else {
		next.PartialResult = reply.Output
		o.finished = reply.Status == ExecFinish
		// A step that starts subtasks waits for them before the next one.
		next.AwaitingSubtasks = !o.finished && len(reply.SubtaskIDs) > 0
	}
	if !o.finished {
		cp, err := next.Marshal()
		if err != nil {
			return execOutcome{}, err
		}
		o.res.Checkpoint = cp
	}
	return o, nil
}

// commitStep records the step with the reply as its output, and the
// checkpoint that follows it (for a replayed step, only the checkpoint).
func commitStep(ctx context.Context, step *taskrun.Step, reply *execReply, o execOutcome) error {
	out, err := json.Marshal(reply)
	if err != nil {
		return err
	}
	res := o.res
	res.Output = out
	return step.End(ctx, res)
}

// submit creates the children a step asked for that are not made yet. The
// key of child i is the step's key + ":sub:" + i, so a step run again after
// a crash gets the same children back; it is also
// telemetry.SubtasksKey(step's key) + ":" + i, so that in a trace they hang
// under the span of their submission, which takes the id that key names.
func (a *Exec) submit(ctx context.Context, run taskrun.Run, key string, reply *execReply) (code string, err error) {
	if n := len(reply.Subtasks) - len(reply.SubtaskIDs); n > 0 {
		span := startSubmitSubtasks(ctx, run, key, n)
		defer func() { endSubmitSubtasks(span, err) }()
	}
	for i := len(reply.SubtaskIDs); i < len(reply.Subtasks); i++ {
		s := reply.Subtasks[i]
		child, err := run.SubmitSubtask(ctx, taskrun.SubtaskSpec{
			Goal: s.Goal, Title: s.Title, Agent: s.Agent, Priority: s.Priority, DependsOn: s.DependsOn, Input: s.Input,
			IdempotencyKey: key + ":sub:" + strconv.Itoa(i),
		})
		if err != nil {
			return CodeSubtaskError, fmt.Errorf("submit subtask %d (%q): %w", i, summarize(s.Goal), err)
		}
		reply.SubtaskIDs = append(reply.SubtaskIDs, child.ID)
	}
	for i := len(reply.MemoryIDs); i < len(reply.Memories); i++ {
		m := reply.Memories[i]
		// The key makes a step run again store each memory once.
		v, err := run.Remember(ctx, taskrun.MemorySpec{Text: m.Text, Tags: m.Tags, IdempotencyKey: key + ":mem:" + strconv.Itoa(i)})
		if err != nil {
			return CodeMemoryError, fmt.Errorf("remember memory %d (%q): %w", i, summarize(m.Text), err)
		}
		reply.MemoryIDs = append(reply.MemoryIDs, v.ID)
	}
	return "", nil
}

// execFailure is a run of the command that produced no step result.
type execFailure struct {
	code   string
	reason string
	stderr string // the tail of stderr
}

func (f *execFailure) Error() string { return f.message(execTaskErrorTail) }

// stepMessage is the failed step's error message: all the stderr kept.
func (f *execFailure) stepMessage() string { return f.message(ExecStderrTail) }

func (f *execFailure) message(tail int) string {
	s := strings.TrimSpace(f.stderr)
	if s == "" {
		return f.reason
	}
	if len(s) > tail {
		s = "…" + strings.ToValidUTF8(s[len(s)-tail:], "")
	}
	return f.reason + "; stderr: " + s
}

// command runs the command once for step n and parses what it printed.
// The live output lines it writes on stderr go to show as they come. A
// traced step's span is in TRACEPARENT (telemetry.EnvTraceparent), the
// OpenTelemetry environment carrier: the command's own spans, and the
// subtasks it submits through the API with it as their traceparent
// header, hang under the step.
func (a *Exec) command(ctx context.Context, info *taskrun.Info, n int, key, traceparent string, stdin []byte, show func(string)) (*execReply, *execFailure) {
	stepCtx, cancel := context.WithTimeout(ctx, a.cfg.StepTimeout)
	defer cancel()
	cmd := exec.CommandContext(stepCtx, a.cfg.Command[0], a.cfg.Command[1:]...)
	cmd.Dir = a.cfg.WorkDir
	cmd.Env = os.Environ()
	for _, k := range slices.Sorted(maps.Keys(a.cfg.Env)) {
		cmd.Env = append(cmd.Env, k+"="+a.cfg.Env[k])
	}
	cmd.Env = append(cmd.Env,
		"ERRAND_TASK_ID="+info.ID,
		"ERRAND_STEP_NUMBER="+strconv.Itoa(n),
		"ERRAND_IDEMPOTENCY_KEY="+key,
	)
	if traceparent != "" {
		cmd.Env = append(cmd.Env, telemetry.EnvTraceparent+"="+traceparent)
	}
	cmd.Stdin = bytes.NewReader(append(slices.Clip(stdin), '\n'))
	stdout := &execLimit{max: MaxExecStdout}
	tail := &execTail{max: ExecStderrTail}
	stderr := &execStderr{show: show, tail: tail, max: MaxExecOutputLine}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = execSysProcAttr()
	cmd.Cancel = func() error { return execKillGroup(cmd.Process) }
	cmd.WaitDelay = ExecWaitDelay

	err := execRun(cmd)
	execCleanup(cmd) // nothing the step started outlives it
	stderr.flush()   // Wait has copied all of stderr: no Write comes after
	fail := func(code, format string, args ...any) *execFailure {
		return &execFailure{code: code, reason: fmt.Sprintf(format, args...), stderr: tail.String()}
	}
	switch {
	case ctx.Err() != nil:
		return nil, fail(CodeExecInterrupted, "step %d stopped: %v", n, context.Cause(ctx))
	case err != nil && errors.Is(stepCtx.Err(), context.DeadlineExceeded):
		return nil, fail(CodeExecTimeout, "step %d ran past its %s timeout; its process group was killed", n, a.cfg.StepTimeout)
	case err != nil && !errors.Is(err, exec.ErrWaitDelay):
		// ErrWaitDelay: the command exited 0 but left a child holding its
		// output open; what it printed before exiting still counts.
		return nil, fail(CodeExecError, "step %d: %s: %v", n, a.cfg.Command[0], err)
	case stdout.over:
		return nil, fail(CodeExecError, "step %d: stdout is longer than %d bytes", n, MaxExecStdout)
	}
	reply, err := parseExecReply(stdout.buf.Bytes())
	if err != nil {
		return nil, fail(CodeExecError, "step %d: %v", n, err)
	}
	return reply, nil
}

// execLimit keeps what a command prints up to max bytes; past it, it
// notes the overflow and discards the rest, so the command never blocks on
// a full pipe.
type execLimit struct {
	max  int
	buf  bytes.Buffer
	over bool
}

func (w *execLimit) Write(p []byte) (int, error) {
	if !w.over && w.buf.Len()+len(p) > w.max {
		w.over = true
	}
	if !w.over {
		w.buf.Write(p)
	}
	return len(p), nil
}

// execTail keeps the last max bytes written to it.
type execTail struct {
	max int
	buf []byte
}

func (w *execTail) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	if len(w.buf) > w.max {
		w.buf = w.buf[:copy(w.buf, w.buf[len(w.buf)-w.max:])]
	}
	return len(p), nil
}

func (w *execTail) String() string { return strings.ToValidUTF8(string(w.buf), "") }

// stepTraceparent is the W3C traceparent of the span of the step begun
// under key, "" when the step is not traced.
func stepTraceparent(ctx context.Context, run taskrun.Run, key string) string {
	sc := trace.SpanContextFromContext(telemetry.StepContext(ctx, run, key))
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return telemetry.FormatTraceparent(sc)
}

// startSubmitSubtasks starts the span of the submission of n subtasks by
// the step begun under key; nil when the step is not traced.
func startSubmitSubtasks(ctx context.Context, run taskrun.Run, key string, n int) trace.Span {
	ctx = telemetry.StepContext(ctx, run, key)
	tracer := telemetry.Tracer(ctx)
	if tracer == nil {
		return nil
	}
	_, span := tracer.Start(telemetry.WithStepSpanID(ctx, telemetry.SubtasksKey(key)), telemetry.SpanSubmitSubtasks,
		trace.WithAttributes(attribute.Int(telemetry.AttrSubtaskCount, n)))
	return span
}

func endSubmitSubtasks(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
