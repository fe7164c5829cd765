package agent

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fuzzLineMax is the line bound of the fuzz target: small, so that the
// fuzzer reaches long lines cheaply.
const fuzzLineMax = 40

// splitStderr feeds data to an execStderr bounding lines at fuzzLineMax in
// pieces cut at the given offsets, and returns what it showed and what it
// kept as stderr.
func splitStderr(data []byte, cuts ...int) (shown []string, tail string, w *execStderr) {
	w = &execStderr{show: func(s string) { shown = append(shown, s) }, tail: &execTail{max: len(data) + 1}, max: fuzzLineMax}
	prev := 0
	for _, c := range cuts {
		c = min(max(c, prev), len(data))
		_, _ = w.Write(data[prev:c])
		prev = c
	}
	_, _ = w.Write(data[prev:])
	w.flush()
	return shown, string(w.tail.buf), w
}

// referenceStderr is what execStderr does, written the plain way: whole
// lines, each live output if short enough and parseExecOutputLine says
// so, else kept.
func referenceStderr(data []byte) (shown []string, tail string) {
	var kept strings.Builder
	for len(data) > 0 {
		line, rest, newline := bytes.Cut(data, []byte{'\n'})
		data = rest
		if text, ok := parseExecOutputLine(line); ok && len(line) <= fuzzLineMax {
			if text != "" {
				shown = append(shown, text)
			}
			continue
		}
		kept.Write(line)
		if newline {
			kept.WriteByte('\n')
		}
	}
	return shown, kept.String()
}

// FuzzExecStderr splits arbitrary stderr into live output and kept
// stderr: however the writes are cut, the result is the line-by-line one,
// a line held never grows past its bound, and live output is only ever a
// JSON object of type output.
func FuzzExecStderr(f *testing.F) {
	for _, s := range []string{
		`{"type":"output","text":"hello"}` + "\nplain\n",
		`{"type":"output","text":"a"}` + "\r\n" + `{"type":"output","text":""}` + "\n",
		`{"type":"progress","text":"x"}` + "\n" + `{"type":"output","text":1}` + "\n" + `{"type":"output"}`,
		`  {"text":"b","type":"output","more":{}}  ` + "\n" + `[{"type":"output","text":"c"}]`,
		`{"type":"output","text":"\ud800 \u00e9"}`, "{\"type\":\"output\",\"text\":\"\xff\"}\n", "{", "\n\n\n", "",
		`{"type":"output","type":"other","text":"dup"}` + "\n" + `{"type":"output","text":"no newline"}`,
		`{"type":"output","text":"` + strings.Repeat("x", fuzzLineMax) + `"}` + "\nafter\n",
		`{"type":"output","text":"12345678901234"}` + "\n" + `{"type":"output","text":"123456789012345"}` + "\n",
	} {
		f.Add([]byte(s), 0, 7)
	}
	f.Fuzz(func(t *testing.T, data []byte, cut1, cut2 int) {
		if len(data) > 1<<12 {
			return // keeps a run quick: the pass below writes once per byte
		}
		wantShown, wantTail := referenceStderr(data)
		shown, tail, w := splitStderr(data, cut1, cut2)
		require.Equal(t, wantShown, shown)
		require.Equal(t, wantTail, tail)
		require.Empty(t, w.line, "flush took the last line")
		for _, line := range bytes.Split(data, []byte{'\n'}) {
			if _, ok := parseExecOutputLine(line); ok {
				var doc map[string]json.RawMessage
				require.NoError(t, json.Unmarshal(bytes.TrimSpace(line), &doc))
			}
		}
		// Byte by byte, the same.
		cuts := make([]int, len(data))
		for i := range cuts {
			cuts[i] = i
		}
		shown, tail, w = splitStderr(data, cuts...)
		require.Equal(t, wantShown, shown)
		require.Equal(t, wantTail, tail)
		require.LessOrEqual(t, cap(w.line), 2*fuzzLineMax)
	})
}

// A command that writes a huge line never makes errand hold more than
// MaxExecOutputLine of it.
func TestExecStderrLineBound(t *testing.T) {
	t.Parallel()
	var shown []string
	w := &execStderr{show: func(s string) { shown = append(shown, s) }, tail: &execTail{max: ExecStderrTail}, max: MaxExecOutputLine}
	chunk := bytes.Repeat([]byte(`{"type":"output","text":"`), 200)
	for range 1024 { // about 5 MiB on one line
		_, _ = w.Write(chunk)
		require.LessOrEqual(t, len(w.line), MaxExecOutputLine)
	}
	require.LessOrEqual(t, cap(w.line), 2*MaxExecOutputLine)
	require.Empty(t, shown)
	_, _ = w.Write([]byte("\n" + `{"type":"output","text":"fine again"}` + "\n"))
	w.flush()
	require.Equal(t, []string{"fine again"}, shown, "the next line is looked into")
	require.Len(t, w.tail.buf, ExecStderrTail)
}
