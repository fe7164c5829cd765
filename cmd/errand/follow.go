package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/apiclient"
)

// followOptions say what follow prints besides the task's events.
type followOptions struct {
	// eventsJSON prints each event as a JSON line with --json (tasks
	// watch); without it --json prints only the finished task (ask --wait).
	eventsJSON bool
	// quiet hides the live output (the model's words as they come).
	quiet bool
}

// follow streams a task's events until the task ends, then prints its
// result (or returns its error with exit code 1). With --json, events
// are printed as JSON lines when eventsJSON is set (tasks watch), else only
// the finished task (ask --wait).
func (a *app) follow(ctx context.Context, c *apiclient.Client, id string, eventsJSON bool) error {
	return a.followTask(ctx, c, id, followOptions{eventsJSON: eventsJSON})
}

// followTask is follow with options. Live output is printed as it comes,
// indented, and its block ends when the step that produced it is
// recorded; with --json (and eventsJSON) each piece is a JSON line.
func (a *app) followTask(ctx context.Context, c *apiclient.Client, id string, opts followOptions) error {
	eventsJSON := opts.eventsJSON
	color := a.color()
	live := a.tty() && !a.asJSON
	defer a.clearLine()
	text := &liveText{w: a.stdout, prefix: liveTextPrefix(color)}
	defer text.endLine()
	// On a terminal the last progress report is a live line, redrawn
	// below each other line; elsewhere every report is a line of its own.
	// It is not drawn while a line of live output is unfinished.
	var progress string
	show := func(s string, isProgress bool) {
		if live && isProgress && text.open {
			progress = s
			return
		}
		a.clearLine()
		text.endLine()
		switch {
		case !live:
			fmt.Fprintln(a.stdout, s)
			return
		case isProgress:
			progress = s
		default:
			fmt.Fprintln(a.stdout, s)
		}
		if progress != "" {
			fmt.Fprint(a.stdout, progress)
			a.live = true
		}
	}

	for ev, err := range c.Events(ctx, apiclient.EventsPath(id), 0) {
		if err != nil {
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return err
			}
			return fmt.Errorf("follow %s: %w", id, err)
		}
		if ev.TaskID != "" && ev.TaskID != id {
			continue
		}
		if ev.ID == 0 && ev.Type == apiclient.DeltaEventType {
			if err := a.showDelta(ev, id, opts, text); err != nil {
				return err
			}
			continue
		}
		if ev.Type == errand.EventTaskStep {
			// The call's text is recorded: its live block is over.
			var st struct {
				StepNo    int `json:"step_no"`
				CallIndex int `json:"call_index"`
			}
			_ = json.Unmarshal(ev.Data, &st)
			a.clearLine()
			text.endCall(st.StepNo, st.CallIndex)
		}
		if a.asJSON {
			if eventsJSON {
				if err := writeJSONLine(a, ev); err != nil {
					return err
				}
			}
		} else {
			stamp := style(color, ansiDim, ev.CreatedAt.Local().Format("15:04:05"))
			if text, isProgress := eventText(ev, id, color); text != "" {
				show(stamp+" "+text, isProgress)
			}
		}
		switch ev.Type {
		case errand.EventTaskCompleted, errand.EventTaskFailed, errand.EventTaskCancelled:
		default:
			continue
		}
		// A replay may hold an end that an operator retry undid: only the
		// task's current status says it is over.
		task, err := c.GetTask(ctx, id)
		if err != nil {
			return fmt.Errorf("follow %s: %w", id, err)
		}
		if task.Status.Terminal() {
			a.clearLine()
			return a.finish(task, eventsJSON)
		}
	}
	return ctx.Err() // the iterator always ends with an error; not reached
}

// deltaLine is a piece of live output as tasks watch --json prints it:
// an event line with id 0 and no actor or time.
type deltaLine struct {
	ID     int64            `json:"id"`
	Type   string           `json:"type"`
	TaskID string           `json:"task_id"`
	Data   *apiclient.Delta `json:"data"`
}

// showDelta prints a piece of live output, unless quiet or --json without
// events. A piece that does not decode is skipped: it is only a preview of
// what the step will record.
func (a *app) showDelta(ev *api.Event, id string, opts followOptions, text *liveText) error {
	if opts.quiet || (a.asJSON && !opts.eventsJSON) {
		return nil
	}
	d, err := apiclient.DecodeDelta(ev)
	if err != nil {
		return nil
	}
	if a.asJSON {
		return writeJSONLine(a, deltaLine{Type: ev.Type, TaskID: id, Data: d})
	}
	a.clearLine()
	text.write(d)
	return nil
}

func writeJSONLine(a *app, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "%s\n", b)
	return err
}

// finish reports a task that ended: its result, or an error with exit
// code 1.
func (a *app) finish(t *api.Task, eventsJSON bool) error {
	if a.asJSON && !eventsJSON {
		if err := printJSON(a.stdout, t); err != nil {
			return err
		}
	}
	switch t.Status {
	case errand.StatusCompleted:
		if a.asJSON {
			return nil
		}
		warning, err := printResult(a.stdout, t.Result)
		if warning != "" {
			fmt.Fprintf(a.stderr, "errand: warning: %s\n", warning)
		}
		return err
	case errand.StatusCancelled:
		msg := fmt.Sprintf("task %s was cancelled", t.ID)
		switch {
		case t.Error == nil:
		case t.Error.Code == string(errand.StatusCancelled) && t.Error.Message != "":
			msg += ": " + t.Error.Message
		default:
			msg += ": " + errorText(t.Error)
		}
		return &exitError{code: 1, err: errors.New(msg)}
	default:
		msg := fmt.Sprintf("task %s failed", t.ID)
		if t.Error != nil {
			msg += ": " + errorText(t.Error)
		}
		return &exitError{code: 1, err: errors.New(msg)}
	}
}

func errorText(e *errand.TaskError) string {
	switch {
	case e.Code == "":
		return e.Message
	case e.Message == "":
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// eventText is one event in words, and whether it is a progress report
// (the live line). "" hides the event.
func eventText(ev *api.Event, id string, color bool) (string, bool) {
	name := strings.TrimPrefix(ev.Type, "task.")
	var td errand.TransitionData
	_ = json.Unmarshal(ev.Data, &td)
	switch ev.Type {
	case "heartbeat":
		return "", false
	case errand.EventTaskProgress:
		var p errand.Progress
		if json.Unmarshal(ev.Data, &p) != nil {
			return "", false
		}
		return progressText(&p), true
	case errand.EventTaskStarted:
		if td.Attempt > 0 {
			return fmt.Sprintf("started (attempt %d)", td.Attempt), false
		}
		return "started", false
	case errand.EventTaskStep:
		return stepText(ev.Data), false
	case errand.EventTaskInputRequired:
		q := td.Question
		if q == "" {
			q = "(no question text)"
		}
		return style(color, ansiYellow, "needs input: "+q) +
			fmt.Sprintf("\n         answer with: errand tasks answer %s \"…\"", id), false
	case errand.EventTaskCompleted:
		return style(color, ansiGreen, "completed"), false
	case errand.EventTaskFailed:
		s := "failed"
		if td.Error != nil {
			s += ": " + errorText(td.Error)
		}
		return style(color, ansiRed, s), false
	case errand.EventTaskCancelled:
		s := "cancelled"
		switch {
		case td.Reason != "":
			s += ": " + td.Reason
		case td.Error != nil:
			s += ": " + errorText(td.Error)
		}
		return style(color, ansiDim, s), false
	case errand.EventTaskRetryScheduled:
		s := "retry scheduled"
		if td.RunAt != nil {
			s += " at " + td.RunAt.Local().Format("15:04:05")
		}
		if td.Error != nil {
			s += ": " + errorText(td.Error)
		}
		return style(color, ansiPurple, s), false
	case errand.EventTaskBudgetWarning, errand.EventTaskBudgetExceeded:
		s := strings.ReplaceAll(name, "_", " ")
		if d := compactJSON(ev.Data); d != "" {
			s += " " + d
		}
		return style(color, ansiYellow, s), false
	}
	s := strings.ReplaceAll(name, "_", " ")
	if td.Reason != "" {
		s += ": " + td.Reason
	}
	return s, false
}

// stepText is a task.step event: step 3: tool_call web_search done (1.2s,
// 340 tokens).
func stepText(data json.RawMessage) string {
	var st struct {
		StepNo     int     `json:"step_no"`
		CallIndex  int     `json:"call_index"`
		Type       string  `json:"type"`
		Status     string  `json:"status"`
		Tool       string  `json:"tool"`
		TokensIn   int64   `json:"tokens_in"`
		TokensOut  int64   `json:"tokens_out"`
		CostUSD    float64 `json:"cost_usd"`
		DurationMS int64   `json:"duration_ms"`
		ErrorCode  string  `json:"error_code"`
	}
	_ = json.Unmarshal(data, &st)
	s := fmt.Sprintf("step %s: %s", stepNo(st.StepNo, st.CallIndex), st.Type)
	if st.Tool != "" {
		s += " " + st.Tool
	}
	s += " " + st.Status
	var details []string
	if st.DurationMS > 0 {
		details = append(details, duration(st.DurationMS))
	}
	if n := st.TokensIn + st.TokensOut; n > 0 {
		details = append(details, fmt.Sprintf("%d tokens", n))
	}
	if st.ErrorCode != "" {
		details = append(details, st.ErrorCode)
	}
	if len(details) > 0 {
		s += " (" + strings.Join(details, ", ") + ")"
	}
	return s
}

// stepNo shows a step's number, with its call index when it is not the
// first call of the step: 3, 3.1.
func stepNo(n, call int) string {
	if call == 0 {
		return itoa(n)
	}
	return fmt.Sprintf("%d.%d", n, call)
}

// liveText prints the live output of a task's calls as it streams in: each
// call's text in a block of lines under a gutter, picked up where the last
// piece left off. A piece that repeats text already printed (the text so
// far, sent again after a reconnect) prints only what is new. A line that
// other output broke is printed again from its start when it goes on, so
// it reads whole.
type liveText struct {
	w      io.Writer
	prefix string

	open    bool // a line of live text is unfinished on w
	inCall  bool // step and call name the block being printed
	step    int
	call    int
	printed int    // characters of the call's text printed
	line    []rune // the call's current line, printed so far
}

// maxReprint bounds how much of a broken line is printed again.
const maxReprint = 240

// liveTextPrefix starts each line of live output: under the text of the
// event lines, past their time.
func liveTextPrefix(color bool) string {
	return "         " + style(color, ansiDim, "│") + " "
}

func (l *liveText) write(d *apiclient.Delta) {
	if !l.inCall || d.StepNo != l.step || d.CallIndex != l.call {
		l.endLine()
		l.inCall, l.step, l.call, l.printed, l.line = true, d.StepNo, d.CallIndex, 0, l.line[:0]
	}
	text := d.Text
	switch {
	case d.Offset > l.printed:
		// Pieces were lost (never on a stream that kept up): mark the gap.
		l.print("…")
	case d.Offset < l.printed:
		text = skipRunes(text, l.printed-d.Offset)
	}
	l.printed = max(l.printed, d.Offset+utf8.RuneCountInString(d.Text))
	l.print(text)
}

// print writes text, a gutter at the start of each line, without the
// control characters a model may send (a terminal would obey them).
func (l *liveText) print(text string) {
	var b strings.Builder
	for _, r := range text {
		if r != '\n' && r != '\t' && unicode.IsControl(r) {
			continue
		}
		if !l.open {
			l.startLine(&b, r == '\n')
		}
		if r == '\n' {
			b.WriteByte('\n')
			l.open, l.line = false, l.line[:0]
			continue
		}
		b.WriteRune(r)
		l.line = append(l.line, r)
	}
	io.WriteString(l.w, b.String())
}

// startLine writes the gutter, and the line so far when other output broke
// it.
func (l *liveText) startLine(b *strings.Builder, empty bool) {
	if empty && len(l.line) == 0 {
		b.WriteString(strings.TrimRight(l.prefix, " "))
		return
	}
	b.WriteString(l.prefix)
	l.open = true
	if n := len(l.line); n > maxReprint {
		b.WriteString("…")
		b.WriteString(string(l.line[n-maxReprint:]))
	} else {
		b.WriteString(string(l.line))
	}
}

// endLine ends an unfinished line of live text, so other output starts on
// a line of its own; the call's next piece goes on a new line, after the
// line so far.
func (l *liveText) endLine() {
	if l.open {
		io.WriteString(l.w, "\n")
		l.open = false
	}
}

// endCall ends the block of the call (step, call) when it is the one
// being printed: its text is recorded, and a later piece starts a block.
func (l *liveText) endCall(step, call int) {
	l.endLine()
	if l.inCall && l.step == step && l.call == call {
		l.inCall, l.line = false, l.line[:0]
	}
}

// skipRunes is s without its first n characters.
func skipRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[i:]
		}
		n--
	}
	return ""
}
