package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/errandhq/errand/internal/taskrun"
)

// The exec protocol's documents (docs/exec-protocol.md): what a step's
// command reads on stdin and what it prints on stdout.

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
