package store

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNotificationText(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", NotificationSnippetRunes+50)
	for _, tc := range []struct {
		name  string
		title string
		typ   string
		data  *TransitionData
		want  string
	}{
		{"CompletedStringOutput", "Research X", EventTaskCompleted,
			&TransitionData{Result: json.RawMessage(`{"output":"Found  three\n\npapers.","warning":null}`)},
			"[Task completed] 'Research X' — Found three papers."},
		{"CompletedJSONOutput", "T", EventTaskCompleted,
			&TransitionData{Result: json.RawMessage(`{"output":{"n":3}}`)},
			`[Task completed] 'T' — {"n":3}`},
		{"CompletedOtherResult", "T", EventTaskCompleted,
			&TransitionData{Result: json.RawMessage(`[1,2]`)},
			`[Task completed] 'T' — [1,2]`},
		{"CompletedNoResult", "T", EventTaskCompleted, &TransitionData{}, "[Task completed] 'T'"},
		{"CompletedNullOutput", "T", EventTaskCompleted,
			&TransitionData{Result: json.RawMessage(`{"output":null}`)}, "[Task completed] 'T'"},
		{"CompletedLongOutput", "T", EventTaskCompleted,
			&TransitionData{Result: json.RawMessage(`{"output":"` + long + `"}`)},
			"[Task completed] 'T' — " + strings.Repeat("é", NotificationSnippetRunes) + "…"},
		{"Failed", "T", EventTaskFailed,
			&TransitionData{Error: &TaskError{Code: "budget_exceeded", Message: "max_tokens"}},
			"[Task failed] 'T' — budget_exceeded: max_tokens"},
		{"CancelledWithReason", "T", EventTaskCancelled,
			&TransitionData{Reason: "dup", Error: &TaskError{Code: "cancelled", Message: "dup"}},
			"[Task cancelled] 'T' — dup"},
		{"CancelledPlain", "T", EventTaskCancelled,
			&TransitionData{Error: &TaskError{Code: "cancelled", Message: "cancelled"}}, "[Task cancelled] 'T'"},
		{"InputRequired", "T", EventTaskInputRequired,
			&TransitionData{Question: "Which\nformat?"}, "[Input required] 'T' — Which format?"},
		{"NilData", "T", EventTaskFailed, nil, "[Task failed] 'T'"},
		{"MultiLineTitle", "Line one\nline two", EventTaskCancelled, &TransitionData{}, "[Task cancelled] 'Line one line two'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, NotificationText(tc.title, tc.typ, tc.data))
		})
	}
}

func TestNotifies(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{EventTaskCompleted, EventTaskFailed, EventTaskCancelled, EventTaskInputRequired} {
		require.True(t, Notifies(typ), typ)
	}
	for _, typ := range []string{EventTaskCreated, EventTaskStarted, EventTaskProgress, EventTaskRetryScheduled,
		EventTaskStep, EventTaskInputAnswered, EventTaskPaused, EventTaskBudgetWarning, EventTaskCancelRequested} {
		require.False(t, Notifies(typ), typ)
	}
}
