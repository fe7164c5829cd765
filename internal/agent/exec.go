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
	"unicode/utf8"

	"github.com/errandhq/errand/internal/taskrun"
)

// Limits of one exec step.
const (
	// MaxExecStdout bounds the step result an exec agent may print; a
	// longer stdout is an exec_error.
	MaxExecStdout = 4 << 20
	// ExecStderrTail is how much of the end of stderr is kept: it becomes
	// the message of a failed step.
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

// execStdin is the document a step's command reads on stdin.
type execStdin struct {
	Task  execTask        `json:"task"`
	State json.RawMessage `json:"state"`
	Step  execStep        `json:"step"`
}

type execTask struct {
	ID      string          `json:"id"`
	Goal    string          `json:"goal"`
	Title   string          `json:"title"`
	Input   json.RawMessage `json:"input"`
	Agent   string          `json:"agent"`
	Attempt int             `json:"attempt"`
}

type execStep struct {
	Number         int    `json:"number"`
	IdempotencyKey string `json:"idempotency_key"`
}

// execReply is the document a step's command prints on stdout, and the
// output of its step record.
type execReply struct {
	Status    string          `json:"status"`
	Output    json.RawMessage `json:"output,omitempty"`
	Progress  *execProgress   `json:"progress,omitempty"`
	Subtasks  []execSubtask   `json:"subtasks,omitempty"`
	Question  string          `json:"question,omitempty"`
	Error     string          `json:"error,omitempty"`
	Retryable bool            `json:"retryable,omitempty"`
	// Memories are stored, with the task's provenance, when the step
	// continues or finishes: the exec form of the remember tool.
	Memories []execMemory `json:"memories,omitempty"`
	// SubtaskIDs is errand's: the children made from Subtasks, in order. It
	// is recorded so that a replayed step does not submit them again.
	SubtaskIDs []string `json:"subtask_ids,omitempty"`
	// MemoryIDs is errand's too: the memories stored from Memories.
	MemoryIDs []string `json:"memory_ids,omitempty"`
}

type execMemory struct {
	Text string   `json:"text"`
	Tags []string `json:"tags,omitempty"`
}

type execProgress struct {
	Current int    `json:"current"`
	Total   int    `json:"total"`
	Label   string `json:"label,omitempty"`
}

type execSubtask struct {
	Goal      string          `json:"goal"`
	Title     string          `json:"title,omitempty"`
	Agent     string          `json:"agent,omitempty"`
	Priority  *int            `json:"priority,omitempty"`
	DependsOn []string        `json:"depends_on,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
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
// done, and applies its result to state.
func (a *Exec) step(ctx context.Context, run taskrun.Run, state *TaskState, n int) (taskrun.Result, bool, error) {
	info := run.Task()
	key := taskrun.StepKey(info.ID, n, 0)
	stdin, err := execInput(info, state, n, key)
	if err != nil {
		return taskrun.Result{}, false, err
	}
	rec, err := run.BeginStep(ctx, taskrun.StepSpec{Number: n, Type: taskrun.StepToolCall, Tool: execTool, Input: stdin})
	if err != nil {
		return taskrun.Result{}, false, err
	}

	began := time.Now()
	var reply *execReply
	var reservation taskrun.Amount
	if rec.Replayed {
		reply = new(execReply)
		if err := json.Unmarshal(rec.Output, reply); err != nil {
			return taskrun.Result{}, false, &taskrun.Error{Code: "bad_step_record", Err: fmt.Errorf("step %d: %w", n, err)}
		}
	} else {
		// A run of the command is a tool call: with a budget that limits tool
		// calls or wall clock, it is reserved first, and refused past them.
		if b := info.Budget; b.MaxToolCalls > 0 || b.MaxWallClock > 0 {
			if b.MaxToolCalls > 0 {
				reservation = taskrun.Amount{ToolCalls: 1}
			}
			if err := run.Reserve(ctx, reservation); err != nil {
				a.endFailed(ctx, run, rec.Key, taskrun.StepResult{
					Status: taskrun.StepDenied, ErrorCode: taskrun.CodeBudgetExceeded, ErrorMessage: err.Error(),
				})
				return taskrun.Result{}, false, err
			}
		}
		var fail *execFailure
		reply, fail = a.command(ctx, info, n, rec.Key, stdin)
		if fail != nil {
			a.endFailed(ctx, run, rec.Key, taskrun.StepResult{
				Status: taskrun.StepFailed, Duration: time.Since(began), ErrorCode: fail.code, ErrorMessage: fail.stepMessage(),
				Release: reservation,
			})
			if ctx.Err() != nil {
				return taskrun.Result{}, false, context.Cause(ctx)
			}
			return taskrun.Result{}, false, &taskrun.Error{Code: fail.code, Err: fail, Retryable: true}
		}
	}

	// end records the step (unless it is a replay) with its output and the
	// checkpoint that follows it.
	end := func(res taskrun.StepResult) error {
		if rec.Replayed {
			return nil
		}
		out, err := json.Marshal(reply)
		if err != nil {
			return err
		}
		res.Output, res.Duration, res.Release = out, time.Since(began), reservation
		return run.EndStep(ctx, rec.Key, res)
	}

	switch reply.Status {
	case ExecError:
		msg := cmp.Or(reply.Error, "the agent reported an error without a message")
		if err := end(taskrun.StepResult{Status: taskrun.StepFailed, ErrorCode: taskrun.DefaultErrorCode, ErrorMessage: msg}); err != nil {
			return taskrun.Result{}, false, err
		}
		return taskrun.Result{}, false, &taskrun.Error{
			Code: taskrun.DefaultErrorCode, Err: fmt.Errorf("step %d: %s", n, msg), Retryable: reply.Retryable,
		}

	case ExecAskUser:
		// The state advances with the question pending: the task waits for
		// the answer, and the next step sees it in state.answers. Should the
		// wait itself be lost, the resumed task asks again (awaitAnswer).
		next := *state
		next.Step = n
		next.PendingQuestion = reply.Question
		next.StepsLog = append(slices.DeleteFunc(slices.Clone(state.StepsLog), func(l StepLog) bool { return l.Step >= n }),
			StepLog{Step: n, Summary: execSummary(reply)})
		cp, err := next.Marshal()
		if err != nil {
			return taskrun.Result{}, false, err
		}
		if rec.Replayed {
			if err := run.Checkpoint(ctx, cp); err != nil {
				return taskrun.Result{}, false, err
			}
		}
		if err := end(taskrun.StepResult{Status: taskrun.StepDone, Checkpoint: cp}); err != nil {
			return taskrun.Result{}, false, err
		}
		*state = next
		return taskrun.Result{}, false, &taskrun.InputNeeded{Question: reply.Question}
	}

	// continue or finish.
	if code, err := a.submit(ctx, run, rec.Key, reply); err != nil {
		if ctx.Err() != nil {
			return taskrun.Result{}, false, context.Cause(ctx)
		}
		if !rec.Replayed {
			a.endFailed(ctx, run, rec.Key, taskrun.StepResult{
				Status: taskrun.StepFailed, Duration: time.Since(began), ErrorCode: code, ErrorMessage: err.Error(),
				Release: reservation,
			})
		}
		return taskrun.Result{}, false, &taskrun.Error{Code: code, Err: err, Retryable: true}
	}
	next := *state
	next.Step = n
	next.PartialResult = reply.Output
	next.StepsLog = append(slices.DeleteFunc(slices.Clone(state.StepsLog), func(l StepLog) bool { return l.Step >= n }),
		StepLog{Step: n, Summary: execSummary(reply)})
	finished := reply.Status == ExecFinish
	// A step that starts subtasks waits for them before the next one.
	next.AwaitingSubtasks = !finished && len(reply.SubtaskIDs) > 0

	res := taskrun.StepResult{Status: taskrun.StepDone}
	if !finished {
		cp, err := next.Marshal()
		if err != nil {
			return taskrun.Result{}, false, err
		}
		if rec.Replayed {
			if err := run.Checkpoint(ctx, cp); err != nil {
				return taskrun.Result{}, false, err
			}
		}
		res.Checkpoint = cp
	}
	if err := end(res); err != nil {
		return taskrun.Result{}, false, err
	}
	*state = next

	p := taskrun.Progress{}
	if reply.Progress != nil {
		p = taskrun.Progress{Current: reply.Progress.Current, Total: reply.Progress.Total, Label: reply.Progress.Label}
	} else {
		p.Current, p.Total, p.Label = state.Progress(a.cfg.MaxSteps)
	}
	if err := run.Progress(ctx, p); err != nil {
		return taskrun.Result{}, false, err
	}
	if next.AwaitingSubtasks {
		return taskrun.Result{}, false, taskrun.WaitSubtasks{}
	}
	if finished {
		out := reply.Output
		if len(out) == 0 {
			out = json.RawMessage(`null`)
		}
		return taskrun.Result{Output: out}, true, nil
	}
	return taskrun.Result{}, false, nil
}

// endFailed records a failed step. It runs even when ctx is done (the
// engine is stopping or the task was cancelled) so the record says why the
// step stopped; a lost lease refuses the write, which is fine.
func (a *Exec) endFailed(ctx context.Context, run taskrun.Run, key string, res taskrun.StepResult) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ExecWaitDelay)
	defer cancel()
	_ = run.EndStep(wctx, key, res)
}

// submit creates the children a step asked for that are not made yet. The
// key of child i is the step's key + ":sub:" + i, so a step run again after
// a crash gets the same children back.
func (a *Exec) submit(ctx context.Context, run taskrun.Run, key string, reply *execReply) (code string, err error) {
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

func execSummary(r *execReply) string {
	s := r.Status
	if len(r.Output) > 0 {
		var b bytes.Buffer
		if json.Compact(&b, r.Output) == nil {
			s += ": " + b.String()
		}
	}
	s = summarize(s)
	if len(r.SubtaskIDs) > 0 {
		s += "; subtasks " + strings.Join(r.SubtaskIDs, ", ")
	}
	return s
}

// execInput is the stdin document of step n.
func execInput(info *taskrun.Info, state *TaskState, n int, key string) (json.RawMessage, error) {
	st, err := execStateDoc(state)
	if err != nil {
		return nil, err
	}
	input := info.Input
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	return marshalPlain(execStdin{
		Task:  execTask{ID: info.ID, Goal: info.Goal, Title: info.Title, Input: input, Agent: info.Agent, Attempt: info.Attempt},
		State: st,
		Step:  execStep{Number: n, IdempotencyKey: key},
	})
}

// execStateFields are the state fields the protocol promises, with the
// value each has when empty (the checkpoint omits them then).
var execStateFields = []struct{ name, empty string }{
	{"partial_result", "null"},
	{"steps_log", "[]"},
	{"answers", "[]"},
	{"subtask_results", "{}"},
	{"subtask_failures", "{}"},
}

// execStateDoc is the state as the command reads it: the checkpoint's
// fields in their order, then the promised ones it left out.
func execStateDoc(state *TaskState) (json.RawMessage, error) {
	s := *state
	s.SchemaVersion = SchemaVersion
	st, err := marshalPlain(&s)
	if err != nil {
		return nil, err
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal(st, &present); err != nil {
		return nil, err
	}
	doc := bytes.NewBuffer(st[:len(st)-1]) // without the closing brace
	for _, f := range execStateFields {
		if _, ok := present[f.name]; !ok {
			fmt.Fprintf(doc, `,%q:%s`, f.name, f.empty)
		}
	}
	doc.WriteByte('}')
	return doc.Bytes(), nil
}

// marshalPlain is json.Marshal without escaping <, > and &: the document
// is read by programs, often shell scripts, not embedded in HTML.
func marshalPlain(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
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
func (a *Exec) command(ctx context.Context, info *taskrun.Info, n int, key string, stdin []byte) (*execReply, *execFailure) {
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
	cmd.Stdin = bytes.NewReader(append(slices.Clip(stdin), '\n'))
	stdout := &execLimit{max: MaxExecStdout}
	stderr := &execTail{max: ExecStderrTail}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = execSysProcAttr()
	cmd.Cancel = func() error { return execKillGroup(cmd.Process) }
	cmd.WaitDelay = ExecWaitDelay

	err := execRun(cmd)
	execCleanup(cmd) // nothing the step started outlives it
	fail := func(code, format string, args ...any) *execFailure {
		return &execFailure{code: code, reason: fmt.Sprintf(format, args...), stderr: stderr.String()}
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

// parseExecReply reads a step result: one JSON object, unknown fields
// ignored.
func parseExecReply(out []byte) (*execReply, error) {
	out = bytes.TrimSpace(out)
	if len(out) == 0 {
		return nil, errors.New("the command printed no step result on stdout")
	}
	var r execReply
	if err := json.Unmarshal(out, &r); err != nil || out[0] != '{' {
		if err == nil {
			err = errors.New("not a JSON object")
		}
		return nil, fmt.Errorf("stdout is not a step result (%v): %s", err, quoteStart(out))
	}
	r.SubtaskIDs, r.MemoryIDs = nil, nil // errand's fields, never the agent's
	switch r.Status {
	case ExecContinue, ExecFinish, ExecError:
	case ExecAskUser:
		if strings.TrimSpace(r.Question) == "" {
			return nil, errors.New(`status "ask_user" needs a question`)
		}
	default:
		return nil, fmt.Errorf("status %q: want continue, finish, ask_user or error", r.Status)
	}
	for i, s := range r.Subtasks {
		if strings.TrimSpace(s.Goal) == "" {
			return nil, fmt.Errorf("subtask %d: goal must not be empty", i)
		}
	}
	for i, m := range r.Memories {
		if strings.TrimSpace(m.Text) == "" {
			return nil, fmt.Errorf("memory %d: text must not be empty", i)
		}
	}
	return &r, nil
}

// quoteStart quotes the first bytes of a malformed stdout for an error.
func quoteStart(b []byte) string {
	const n = 200
	s := string(b)
	if len(s) > n {
		s = s[:n]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		return strconv.Quote(s) + "…"
	}
	return strconv.Quote(s)
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
