// Package remote is errand's a2a agent: it hands a task to a remote A2A
// agent (v1.0, JSON-RPC binding) and follows it there.
//
// The message that starts the remote task is a durable step: its step key
// is the message id, so a resumed attempt either replays the recorded
// remote task or, if the first attempt died mid-send, sends the same
// message again, which an A2A server takes as the same request. The
// remote task's id is in the checkpoint; a resumed task follows it rather
// than starting another.
//
// The remote task's status messages become progress reports. When it asks
// a question (input-required) the errand task asks the same question; the
// answer is sent back as a durable step of its own, so it is sent once.
// The remote task's end is the task's: its artifacts are the result
// (kept by A2A's append rule; an errand peer's live output is left out),
// its failure or cancellation an error that is not retried. Cancelling the
// errand task cancels the remote one.
//
// With traces on, every request carries the W3C traceparent of the span
// it is made in: a message the step's (task.step, tool a2a.send or
// a2a.answer), the reads and the stream the attempt's. The remote agent's
// spans then join the run's trace under them; an errand peer with traces
// on makes the remote task's run a child of the sending step.
package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/errandhq/errand/internal/a2a/wire"
	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/internal/telemetry"
)

// Config configures an a2a agent.
type Config struct {
	// CardURL is the remote agent's card, e.g.
	// https://host/.well-known/agent-card.json.
	CardURL string
	// Token, when set, is sent as a bearer token.
	Token string
	// Metadata, a JSON object, goes with the message that starts each
	// remote task (an errand peer reads its "agent" to pick the agent).
	Metadata   json.RawMessage
	HTTPClient *http.Client
	// Retry is how long to wait before following a task again after its
	// stream broke (default 1 s).
	Retry time.Duration
}

// Agent is the a2a agent; it implements taskrun.Handler.
type Agent struct {
	client   *client
	metadata json.RawMessage
	retry    time.Duration
}

// New returns an a2a agent for cfg.
func New(cfg Config) (*Agent, error) {
	if cfg.CardURL == "" {
		return nil, errors.New("a2a agent: card_url is required")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	if cfg.Retry <= 0 {
		cfg.Retry = time.Second
	}
	if len(cfg.Metadata) > 0 {
		var obj map[string]any
		if json.Unmarshal(cfg.Metadata, &obj) != nil || obj == nil {
			return nil, errors.New("a2a agent: metadata must be a JSON object")
		}
	}
	return &Agent{client: &client{cardURL: cfg.CardURL, token: cfg.Token, http: cfg.HTTPClient}, metadata: cfg.Metadata, retry: cfg.Retry}, nil
}

// state is the agent's checkpoint.
type state struct {
	RemoteTaskID string `json:"remote_task_id"`
	// Answered is how many of the task's answers were sent on.
	Answered int `json:"answered"`
}

// Step numbers: the first message is step 1, the n-th answer step 1+n.
const firstStep = 1

// Error codes the agent ends a task with.
const (
	CodeRemoteFailed   = "remote_failed"
	CodeRemoteCanceled = "remote_canceled"
	CodeRemoteRejected = "remote_rejected"
)

// Handle runs one attempt of a task.
func (a *Agent) Handle(ctx context.Context, run taskrun.Run) (taskrun.Result, error) {
	var st state
	if cp := run.Task().Checkpoint; len(cp) > 0 {
		if err := json.Unmarshal(cp, &st); err != nil {
			return taskrun.Result{}, &taskrun.Error{Code: "bad_checkpoint", Err: err}
		}
	}
	if st.RemoteTaskID == "" {
		id, err := a.start(ctx, run)
		if err != nil {
			return taskrun.Result{}, err
		}
		st.RemoteTaskID = id
		if err := a.save(ctx, run, st); err != nil {
			return taskrun.Result{}, err
		}
	}
	defer func() {
		// Cancelled: tell the remote agent, once, briefly. A daemon that
		// stops (another cause) leaves it running: the task resumes here.
		if errors.Is(context.Cause(ctx), taskrun.ErrCancelled) {
			stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = a.client.cancel(stop, st.RemoteTaskID)
		}
	}()
	answers, err := run.Answers(ctx)
	if err != nil {
		return taskrun.Result{}, err
	}
	for st.Answered < len(answers) {
		if err := a.answer(ctx, run, st.RemoteTaskID, st.Answered+1, answers[st.Answered].Answer); err != nil {
			return taskrun.Result{}, err
		}
		st.Answered++
		if err := a.save(ctx, run, st); err != nil {
			return taskrun.Result{}, err
		}
	}
	return a.follow(ctx, run, st.RemoteTaskID)
}

func (a *Agent) save(ctx context.Context, run taskrun.Run, st state) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return run.Checkpoint(ctx, b)
}

// start sends the task's goal (and input) as the message that makes the
// remote task, as a durable step; it returns the remote task's id.
func (a *Agent) start(ctx context.Context, run taskrun.Run) (string, error) {
	info := run.Task()
	out, err := a.step(ctx, run, firstStep, "a2a.send", func(ctx context.Context, key string) (any, error) {
		m := &wire.Message{MessageID: key, ContextID: info.SessionID, Role: json.RawMessage(`"` + wire.RoleUser + `"`),
			Parts: []wire.Part{wire.TextPart(info.Goal)}, Metadata: a.metadata}
		if len(info.Input) > 0 && string(info.Input) != "{}" && string(info.Input) != "null" {
			m.Parts = append(m.Parts, wire.Part{Data: info.Input, MediaType: "application/json"})
		}
		t, err := a.client.send(ctx, m)
		if err != nil {
			return nil, err
		}
		return map[string]string{"task_id": t.ID, "context_id": t.ContextID}, nil
	})
	if err != nil {
		return "", err
	}
	var sent struct {
		TaskID string `json:"task_id"`
	}
	if err := json.Unmarshal(out, &sent); err != nil || sent.TaskID == "" {
		return "", &taskrun.Error{Code: "bad_step", Err: fmt.Errorf("the recorded send has no task id: %s", out)}
	}
	return sent.TaskID, nil
}

// answer sends the n-th answer to the remote task, as a durable step. An
// answer the remote task no longer waits for was taken by an attempt that
// died before it could record so.
func (a *Agent) answer(ctx context.Context, run taskrun.Run, remoteTaskID string, n int, text string) error {
	_, err := a.step(ctx, run, firstStep+n, "a2a.answer", func(ctx context.Context, key string) (any, error) {
		m := &wire.Message{MessageID: key, TaskID: remoteTaskID, Role: json.RawMessage(`"` + wire.RoleUser + `"`),
			Parts: []wire.Part{wire.TextPart(text)}}
		t, err := a.client.send(ctx, m)
		if isCode(err, codeUnsupportedOperation) {
			if now, getErr := a.client.get(ctx, remoteTaskID); getErr == nil && now.Status.State != wire.StateInputRequired {
				return map[string]string{"state": now.Status.State}, nil
			}
		}
		if err != nil {
			return nil, err
		}
		return map[string]string{"state": t.Status.State}, nil
	})
	return err
}

// step runs fn as a durable step, or replays it. Its record is written
// even if ctx is cancelled once fn returned (taskrun.Step.End), so a
// message the remote agent took is replayed on resume, not sent again.
// fn's context carries the step's span when the step is traced, so the
// message it sends names the step as the remote task's parent.
func (a *Agent) step(ctx context.Context, run taskrun.Run, n int, tool string, fn func(ctx context.Context, key string) (any, error)) (json.RawMessage, error) {
	step, err := taskrun.BeginStep(ctx, run, taskrun.StepSpec{Number: n, Type: taskrun.StepToolCall, Tool: tool})
	if err != nil {
		return nil, err
	}
	if step.Replayed() {
		rec := step.Record()
		if rec.Status != taskrun.StepDone {
			return nil, fmt.Errorf("step %d (%s) failed before: %s", n, tool, rec.Output)
		}
		return rec.Output, nil
	}
	out, err := fn(telemetry.StepContext(ctx, run, step.Key()), step.Key())
	res := taskrun.StepResult{Status: taskrun.StepDone}
	if err == nil {
		res.Output, err = json.Marshal(out)
	}
	if err != nil {
		res = taskrun.StepResult{Status: taskrun.StepFailed, ErrorCode: "a2a_error", ErrorMessage: err.Error()}
	}
	if endErr := step.End(ctx, res); endErr != nil {
		return nil, errors.Join(err, endErr)
	}
	return res.Output, err
}

// follow waits for the remote task to settle, reporting its progress: its
// stream while it lasts, its state whenever the stream breaks.
func (a *Agent) follow(ctx context.Context, run taskrun.Run, taskID string) (taskrun.Result, error) {
	label := ""
	report := func(s *wire.TaskStatus) error {
		if text := statusText(s); text != "" && text != label {
			label = text
			return run.Progress(ctx, taskrun.Progress{Label: clip(text, 200)})
		}
		return nil
	}
	for {
		t, err := a.client.get(ctx, taskID)
		if isCode(err, codeTaskNotFound) {
			return taskrun.Result{}, &taskrun.Error{Code: CodeRemoteFailed, Err: fmt.Errorf("the remote task %s is gone: %w", taskID, err)}
		}
		if err != nil {
			return taskrun.Result{}, err // retryable: the remote agent may be back later
		}
		if done, res, err := settle(t); done {
			return res, err
		}
		if err := report(&t.Status); err != nil {
			return taskrun.Result{}, err
		}
		var artifacts []wire.Artifact
		for ev, err := range a.client.subscribe(ctx, taskID) {
			if err != nil {
				break // read its state again
			}
			switch {
			case ev.Task != nil:
				if done, res, err := settle(ev.Task); done {
					return res, err
				}
			case ev.ArtifactUpdate != nil:
				artifacts = addArtifact(artifacts, ev.ArtifactUpdate)
			case ev.StatusUpdate != nil:
				s := &ev.StatusUpdate.Status
				if done, res, err := settle(&wire.Task{ID: taskID, Status: *s, Artifacts: artifacts}); done {
					return res, err
				}
				if err := report(s); err != nil {
					return taskrun.Result{}, err
				}
			}
		}
		select {
		case <-ctx.Done():
			return taskrun.Result{}, ctx.Err()
		case <-time.After(a.retry):
		}
	}
}

// settle says whether t has settled, and if so what the errand task
// becomes: completed with its artifacts, waiting for an answer to its
// question, or failed.
func settle(t *wire.Task) (bool, taskrun.Result, error) {
	switch t.Status.State {
	case wire.StateCompleted:
		out, err := json.Marshal(outputOf(t.Artifacts))
		return true, taskrun.Result{Output: out}, err
	case wire.StateInputRequired, wire.StateAuthRequired:
		q := statusText(&t.Status)
		if q == "" {
			q = "The remote agent needs input."
		}
		return true, taskrun.Result{}, &taskrun.InputNeeded{Question: q}
	case wire.StateFailed:
		return true, taskrun.Result{}, &taskrun.Error{Code: CodeRemoteFailed, Err: errors.New(orDefault(statusText(&t.Status), "the remote task failed"))}
	case wire.StateCanceled:
		return true, taskrun.Result{}, &taskrun.Error{Code: CodeRemoteCanceled, Err: errors.New(orDefault(statusText(&t.Status), "the remote task was cancelled"))}
	case wire.StateRejected:
		return true, taskrun.Result{}, &taskrun.Error{Code: CodeRemoteRejected, Err: errors.New(orDefault(statusText(&t.Status), "the remote agent rejected the task"))}
	}
	return false, taskrun.Result{}, nil
}

// addArtifact keeps an artifact update as A2A says: a piece with append
// adds its parts to the artifact with its id, any other replaces it. The
// live output an errand peer streams is left out: it is not the task's
// result, which follows as its own artifact.
func addArtifact(artifacts []wire.Artifact, u *wire.ArtifactUpdate) []wire.Artifact {
	if isLiveOutput(u.Artifact.Metadata) {
		return artifacts
	}
	for i := range artifacts {
		if artifacts[i].ArtifactID != u.Artifact.ArtifactID {
			continue
		}
		if u.Append {
			artifacts[i].Parts = append(artifacts[i].Parts, u.Artifact.Parts...)
		} else {
			artifacts[i] = u.Artifact
		}
		return artifacts
	}
	return append(artifacts, u.Artifact)
}

// isLiveOutput reports whether an artifact's metadata marks it as an
// errand peer's live output.
func isLiveOutput(metadata json.RawMessage) bool {
	var md struct {
		Errand struct {
			LiveOutput bool `json:"live_output"`
		} `json:"errand"`
	}
	return json.Unmarshal(metadata, &md) == nil && md.Errand.LiveOutput
}

// outputOf is a result's output from its artifacts: the text of a single
// text part, the data of a single data part, else every part of every
// artifact.
func outputOf(artifacts []wire.Artifact) any {
	var parts []wire.Part
	for _, a := range artifacts {
		parts = append(parts, a.Parts...)
	}
	if len(parts) == 1 {
		switch p := parts[0]; {
		case p.Text != nil:
			return *p.Text
		case len(p.Data) > 0:
			return p.Data
		}
	}
	var texts []string
	for _, p := range parts {
		if p.Text == nil {
			return parts
		}
		texts = append(texts, *p.Text)
	}
	return strings.Join(texts, "\n")
}

// statusText is the text of a status's message.
func statusText(s *wire.TaskStatus) string {
	if s.Message == nil {
		return ""
	}
	var texts []string
	for _, p := range s.Message.Parts {
		if p.Text != nil {
			texts = append(texts, *p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
