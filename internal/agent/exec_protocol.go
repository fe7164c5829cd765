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
// command reads on stdin, what it prints on stdout, and the live output
// lines it may write on stderr.

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

// MaxExecOutputLine bounds one line of stderr that errand looks into for
// live output; a longer line is ordinary stderr, kept in the tail, so a
// command cannot make errand buffer without limit.
const MaxExecOutputLine = 64 << 10

// execOutputType is the type of a stderr line that is live output.
const execOutputType = "output"

// parseExecOutputLine reads one line of stderr, without its newline: a
// JSON object {"type":"output","text":"…"} is live output and gives its
// text; any other line, valid JSON or not, is ordinary stderr. Unknown
// fields are ignored, as everywhere in the protocol.
func parseExecOutputLine(line []byte) (text string, ok bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return "", false // the common case, a plain message, costs no decode
	}
	var doc struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(line, &doc); err != nil || doc.Type != execOutputType || doc.Text == nil {
		return "", false
	}
	return *doc.Text, true
}

// execStderr takes what a command writes on stderr line by line: live
// output lines go to show, every other byte to tail, in order. It holds at
// most max bytes of a line (MaxExecOutputLine); a line that grows past
// that is ordinary stderr from then on. Writes come from one goroutine
// (os/exec's copy of the pipe); flush takes the last line once the command
// is done.
type execStderr struct {
	show func(text string)
	tail *execTail
	max  int
	line []byte
	long bool // the current line went past max
}

func (w *execStderr) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i+1]
		}
		p = p[len(chunk):]
		body, ended := bytes.CutSuffix(chunk, []byte{'\n'})
		switch {
		case w.long:
			w.tail.Write(chunk)
		case len(w.line)+len(body) > w.max:
			w.tail.Write(w.line)
			w.tail.Write(chunk)
			w.line, w.long = w.line[:0], true
		default:
			w.line = append(w.line, body...)
			if ended {
				w.endLine(true)
			}
		}
		if ended {
			w.long = false
		}
	}
	return n, nil
}

// endLine hands the line held to show or to tail; newline says whether
// it ended in one (the last line of stderr may not).
func (w *execStderr) endLine(newline bool) {
	if text, ok := parseExecOutputLine(w.line); ok {
		if text != "" {
			w.show(text)
		}
	} else {
		w.tail.Write(w.line)
		if newline {
			w.tail.Write([]byte{'\n'})
		}
	}
	w.line = w.line[:0]
}

// flush takes a last line that ended without a newline.
func (w *execStderr) flush() {
	if !w.long && len(w.line) > 0 {
		w.endLine(false)
	}
	w.long = false
}
