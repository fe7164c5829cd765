package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
)

func TestBar(t *testing.T) {
	t.Parallel()
	require.Equal(t, "[░░░░░░░░░░] 0%", bar(0))
	require.Equal(t, "[██████░░░░] 60%", bar(60))
	require.Equal(t, "[███░░░░░░░] 33%", bar(33))
	require.Equal(t, "[██████████] 100%", bar(100))
	require.Equal(t, "[██████████] 100%", bar(140))
	require.Equal(t, "[░░░░░░░░░░] 0%", bar(-5))
	require.Equal(t, 40, percentage(&errand.Progress{CurrentStep: 2, TotalSteps: 5}))
	require.Equal(t, 60, percentage(&errand.Progress{CurrentStep: 2, TotalSteps: 5, Percentage: 60}))
}

func TestAge(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		-time.Second:             "0s",
		45 * time.Second:         "45s",
		3 * time.Minute:          "3m",
		59 * time.Minute:         "59m",
		2 * time.Hour:            "2h",
		47 * time.Hour:           "47h",
		3 * 24 * time.Hour:       "3d",
		400 * 24 * time.Hour:     "400d",
		90*time.Second + 1e6:     "1m",
		119*time.Minute + 1e6:    "1h",
		24*time.Hour + time.Hour: "25h",
	} {
		require.Equal(t, want, age(now, now.Add(-d)), d)
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	require.Equal(t, "short", truncate("short", 10))
	require.Equal(t, "one line only", truncate("one\nline   only", 20))
	require.Equal(t, "abcdefghi…", truncate("abcdefghijkl", 10))
	require.Equal(t, "ééééé…", truncate("éééééééé", 6))
}

func TestPrintResult(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		result, out, warning string
	}{
		{`{"output":"plain text"}`, "plain text\n", ""},
		{`{"output":"ends in newline\n"}`, "ends in newline\n", ""},
		{`{"output":{"a":[1,2]},"warning":"max_steps reached"}`, "{\n  \"a\": [\n    1,\n    2\n  ]\n}\n", "max_steps reached"},
		{`{"output":42}`, "42\n", ""},
		{`{"something":"else"}`, "{\n  \"something\": \"else\"\n}\n", ""},
		{`"bare"`, "bare\n", ""},
		{`null`, "", ""},
		{``, "", ""},
	} {
		var buf bytes.Buffer
		warning, err := printResult(&buf, json.RawMessage(tc.result))
		require.NoError(t, err)
		require.Equal(t, tc.out, buf.String(), tc.result)
		require.Equal(t, tc.warning, warning)
	}
}

func TestTable(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	tb := &table{indent: "  "}
	tb.row("A", style(true, ansiRed, "red"), "")
	tb.row("longer", "x", "end")
	require.NoError(t, tb.write(&buf))
	require.Equal(t, "  A       "+ansiRed+"red"+ansiReset+"\n  longer  x    end\n", buf.String())
}

func TestParseSince(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Time{
		"2025-02-01T10:00:00Z":      time.Date(2025, 2, 1, 10, 0, 0, 0, time.UTC),
		"2025-02-01T10:00:00+02:00": time.Date(2025, 2, 1, 8, 0, 0, 0, time.UTC),
		"24h":                       now.Add(-24 * time.Hour),
		"90m":                       now.Add(-90 * time.Minute),
		"7d":                        now.AddDate(0, 0, -7),
		"2025-02-01":                time.Date(2025, 2, 1, 0, 0, 0, 0, time.Local),
	} {
		got, err := parseSince(in, now)
		require.NoError(t, err, in)
		require.True(t, want.Equal(got), "%s: %v", in, got)
	}
	for _, bad := range []string{"", "yesterday", "-5h", "5", "d"} {
		_, err := parseSince(bad, now)
		require.Error(t, err, bad)
	}
}

func TestEventText(t *testing.T) {
	t.Parallel()
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	txt := func(typ string, data any) string {
		s, _ := eventText(&api.Event{Type: typ, Data: raw(data)}, "tsk_1", false)
		return s
	}
	require.Equal(t, "started (attempt 2)", txt(errand.EventTaskStarted, errand.TransitionData{Attempt: 2}))
	require.Equal(t, "retry scheduled: rate_limited: slow down", txt(errand.EventTaskRetryScheduled,
		errand.TransitionData{Error: &errand.TaskError{Code: "rate_limited", Message: "slow down"}}))
	require.Equal(t, "cancelled: not needed", txt(errand.EventTaskCancelled, errand.TransitionData{Reason: "not needed"}))
	require.Equal(t, "step 2.1: tool_call search denied (tool_denied)", txt(errand.EventTaskStep,
		map[string]any{"step_no": 2, "call_index": 1, "type": "tool_call", "tool": "search", "status": "denied", "error_code": "tool_denied"}))
	require.Equal(t, `budget warning {"limit":"max_tokens"}`, txt(errand.EventTaskBudgetWarning, map[string]any{"limit": "max_tokens"}))
	require.Equal(t, "paused", txt(errand.EventTaskPaused, map[string]any{}))
	require.Equal(t, "", txt("heartbeat", map[string]any{}))
	s, isProgress := eventText(&api.Event{Type: errand.EventTaskProgress, Data: raw(errand.Progress{Percentage: 10, Label: "x"})}, "tsk_1", false)
	require.True(t, isProgress)
	require.Equal(t, "[█░░░░░░░░░] 10% x", s)
}
