package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/apiclient"
)

// sseDelta writes a piece of live output as the daemon does: no id: line.
func sseDelta(w io.Writer, step, call, offset int, text string) {
	b, _ := json.Marshal(apiclient.Delta{StepNo: step, CallIndex: call, Offset: offset, Text: text})
	fmt.Fprintf(w, "event: task.output.delta\ndata: %s\n\n", b)
}

// liveEvents is a task whose first step streams two lines of text, in
// pieces, one sent again as a rejoining client would get it (the text so
// far at offset 0), and whose second step streams one more.
func liveEvents(w io.Writer) {
	sseEvent(w, 1, errand.EventTaskStarted, "tsk_1", errand.TransitionData{To: errand.StatusRunning, Attempt: 1})
	sseDelta(w, 1, 0, 0, "Let me ")
	sseDelta(w, 1, 0, 7, "think.\nÉtape")
	sseDelta(w, 1, 0, 0, "Let me think.\nÉtape") // nothing new
	sseDelta(w, 1, 0, 19, " une.")
	sseEvent(w, 2, errand.EventTaskStep, "tsk_1", map[string]any{"step_no": 1, "type": "llm_call", "status": "done", "duration_ms": 1200})
	sseDelta(w, 2, 0, 0, "Done\x1b[31m.")
	sseEvent(w, 3, errand.EventTaskStep, "tsk_1", map[string]any{"step_no": 2, "type": "llm_call", "status": "done", "duration_ms": 300})
	sseEvent(w, 4, errand.EventTaskCompleted, "tsk_1", errand.TransitionData{To: errand.StatusCompleted})
}

var liveFinal = &api.Task{ID: "tsk_1", Status: errand.StatusCompleted, Result: json.RawMessage(`{"output":"ok"}`)}

// The words come indented under the event lines, each call's in a block
// that ends when its step is recorded; control characters are dropped.
func TestAskWaitPrintsLiveOutput(t *testing.T) {
	t.Parallel()
	f := streamDaemon(t, liveFinal, liveEvents)
	r := cli(t, testEnv(nil), f.args("ask", "think", "--wait")...)
	require.NoError(t, r.err, r.stderr)
	lines := strings.Split(r.stdout, "\n")
	var shown []string
	for _, line := range lines {
		if i := strings.Index(line, " "); i == 8 && line[2] == ':' {
			line = "HH:MM:SS" + line[8:] // the event's local time
		}
		shown = append(shown, line)
	}
	require.Equal(t, []string{
		"tsk_1",
		"HH:MM:SS started (attempt 1)",
		"         │ Let me think.",
		"         │ Étape une.",
		"HH:MM:SS step 1: llm_call done (1.2s)",
		"         │ Done[31m.",
		"HH:MM:SS step 2: llm_call done (300ms)",
		"HH:MM:SS completed",
		"ok",
		"",
	}, shown)
}

func TestQuietHidesLiveOutput(t *testing.T) {
	t.Parallel()
	f := streamDaemon(t, liveFinal, liveEvents)
	for _, args := range [][]string{{"ask", "think", "--wait", "--quiet"}, {"tasks", "watch", "tsk_1", "-q"}} {
		r := cli(t, testEnv(nil), f.args(args...)...)
		require.NoError(t, r.err, r.stderr)
		require.NotContains(t, r.stdout, "│", args)
		require.Contains(t, r.stdout, "step 1: llm_call done (1.2s)\n", args)
	}
}

// tasks watch --json prints each piece as a line with id 0; ask --json
// --wait prints the finished task alone.
func TestLiveOutputJSON(t *testing.T) {
	t.Parallel()
	f := streamDaemon(t, liveFinal, liveEvents)
	r := cli(t, testEnv(nil), f.args("--json", "tasks", "watch", "tsk_1")...)
	require.NoError(t, r.err, r.stderr)
	var types []string
	var text string
	for _, line := range strings.Split(strings.TrimRight(r.stdout, "\n"), "\n") {
		var ev struct {
			ID     int64            `json:"id"`
			Type   string           `json:"type"`
			TaskID string           `json:"task_id"`
			Data   *apiclient.Delta `json:"data"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &ev), line)
		require.Equal(t, "tsk_1", ev.TaskID)
		types = append(types, ev.Type)
		if ev.Type == apiclient.DeltaEventType {
			require.Zero(t, ev.ID)
			if ev.Data.StepNo == 1 {
				text = string(append([]rune(text)[:ev.Data.Offset], []rune(ev.Data.Text)...))
			}
		}
	}
	require.Equal(t, []string{
		"task.started", "task.output.delta", "task.output.delta", "task.output.delta", "task.output.delta",
		"task.step", "task.output.delta", "task.step", "task.completed",
	}, types)
	require.Equal(t, "Let me think.\nÉtape une.", text)

	r = cli(t, testEnv(nil), f.args("--json", "tasks", "watch", "tsk_1", "--quiet")...)
	require.NoError(t, r.err, r.stderr)
	require.NotContains(t, r.stdout, "task.output.delta")

	r = cli(t, testEnv(nil), f.args("--json", "ask", "think", "--wait")...)
	require.NoError(t, r.err, r.stderr)
	var task api.Task
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &task), r.stdout)
	require.Equal(t, errand.StatusCompleted, task.Status)
}

// On a terminal the progress line is not drawn in the middle of a line of
// live output: it waits for the next event line.
func TestLiveOutputAndProgressLine(t *testing.T) {
	t.Parallel()
	f := streamDaemon(t, liveFinal, func(w io.Writer) {
		sseEvent(w, 1, errand.EventTaskProgress, "tsk_1", errand.Progress{CurrentStep: 1, TotalSteps: 2, Label: "thinking", Percentage: 50})
		sseDelta(w, 1, 0, 0, "Hmm")
		sseEvent(w, 2, errand.EventTaskProgress, "tsk_1", errand.Progress{CurrentStep: 1, TotalSteps: 2, Label: "still", Percentage: 60})
		sseDelta(w, 1, 0, 3, "…")
		sseEvent(w, 3, errand.EventTaskStep, "tsk_1", map[string]any{"step_no": 1, "type": "llm_call", "status": "done"})
		sseEvent(w, 4, errand.EventTaskCompleted, "tsk_1", errand.TransitionData{To: errand.StatusCompleted})
	})
	e := testEnv(map[string]string{"NO_COLOR": "1"})
	e.isTerminal = func(io.Writer) bool { return true }
	r := cli(t, e, f.args("ask", "x", "--wait")...)
	require.NoError(t, r.err, r.stderr)
	// The first progress line is erased before the text, the second is
	// held until the step's line ends the text.
	require.Contains(t, r.stdout, "[█████░░░░░] 50% thinking (1/2)\r\x1b[K         │ Hmm…\n")
	step := strings.Index(r.stdout, "step 1: llm_call done\n")
	require.Positive(t, step, r.stdout)
	require.Less(t, step, strings.Index(r.stdout, "[██████░░░░] 60% still (1/2)\r\x1b[K"), r.stdout)
	require.True(t, strings.HasSuffix(r.stdout, "\r\x1b[Kok\n"), "%q", r.stdout)
}

func TestLiveTextPieces(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	l := &liveText{w: &b, prefix: "> "}
	write := func(step, call, offset int, text string) {
		l.write(&apiclient.Delta{StepNo: step, CallIndex: call, Offset: offset, Text: text})
	}
	write(1, 0, 0, "añb")
	write(1, 0, 1, "ñbc") // overlaps what was printed
	write(1, 0, 9, "z")   // pieces 4–8 were lost
	write(1, 1, 0, "\n\nx\r\t")
	l.endCall(1, 0)     // not the call being printed: only the line ends
	write(1, 1, 5, "y") // the dropped \r counts; the broken line reads whole
	l.endCall(1, 1)
	write(1, 1, 0, "again") // a later piece starts a block of its own
	l.endLine()
	require.Equal(t, "> añbc…z\n>\n>\n> x\t\n> x\ty\n> again\n", b.String())

	// A long broken line is printed again from near its end only.
	b.Reset()
	long := strings.Repeat("ab", maxReprint)
	write(2, 0, 0, long)
	l.endLine()
	write(2, 0, 2*maxReprint, "!")
	l.endLine()
	require.Equal(t, "> "+long+"\n> …"+long[maxReprint:]+"!\n", b.String())
}

// A watcher that joins mid-call gets the text so far before the replay of
// the task's events: the line they break is printed again, whole, as the
// words go on.
func TestWatchJoinsMidCall(t *testing.T) {
	t.Parallel()
	f := streamDaemon(t, liveFinal, func(w io.Writer) {
		sseDelta(w, 1, 0, 0, "So far")
		sseEvent(w, 1, errand.EventTaskCreated, "tsk_1", errand.TransitionData{To: errand.StatusPending})
		sseEvent(w, 2, errand.EventTaskStarted, "tsk_1", errand.TransitionData{To: errand.StatusRunning, Attempt: 1})
		sseDelta(w, 1, 0, 6, ", so good.")
		sseEvent(w, 3, errand.EventTaskStep, "tsk_1", map[string]any{"step_no": 1, "type": "llm_call", "status": "done"})
		sseEvent(w, 4, errand.EventTaskCompleted, "tsk_1", errand.TransitionData{To: errand.StatusCompleted})
	})
	r := cli(t, testEnv(nil), f.args("tasks", "watch", "tsk_1")...)
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, "         │ So far\n")
	require.Contains(t, r.stdout, "started (attempt 1)\n         │ So far, so good.\n")
}

// FuzzLiveText prints arbitrary pieces (two calls, any offsets, any text):
// it never panics, prints no control character but newline and tab, and
// puts the gutter at the start of every line it writes.
func FuzzLiveText(f *testing.F) {
	f.Add(0, "Hello", 5, " world", 0, "Hello wo", true)
	f.Add(3, "\x1b[2J\r\n\x00é", -1, "", 1<<30, "x\n\ny", false)
	f.Add(0, "a\u0085b\u200bc", 2, "ñ", 1, "\xff\xfe", true)
	f.Fuzz(func(t *testing.T, o1 int, t1 string, o2 int, t2 string, o3 int, t3 string, otherCall bool) {
		var b strings.Builder
		l := &liveText{w: &b, prefix: "> "}
		for i, p := range []struct {
			offset int
			text   string
		}{{o1, t1}, {o2, t2}, {o3, t3}} {
			if p.offset < 0 {
				continue // DecodeDelta refuses these
			}
			call := 0
			if otherCall && i == 1 {
				call = 1
			}
			l.write(&apiclient.Delta{StepNo: 1, CallIndex: call, Offset: p.offset, Text: p.text})
			if i == 1 {
				l.endLine() // an event line in between
			}
		}
		l.endLine()
		out := b.String()
		for _, r := range out {
			if r != '\n' && r != '\t' {
				require.False(t, unicode.IsControl(r), "%q", out)
			}
		}
		for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if out != "" {
				require.True(t, strings.HasPrefix(line, ">"), "%q in %q", line, out)
			}
		}
	})
}
