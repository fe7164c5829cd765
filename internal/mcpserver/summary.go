package mcpserver

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
)

// maxSummaryOutput bounds how much of an output a summary quotes; the
// whole of it is in the structured result and the output resource.
const maxSummaryOutput = 4000

// describeResult is the summary of a one-task result.
func describeResult(res *taskResult) string {
	var b strings.Builder
	if res.TimedOut != nil && *res.TimedOut {
		b.WriteString("Still waiting (timed out): ")
	}
	b.WriteString(describeTask(res.Task))
	if q := res.Question; q != nil {
		fmt.Fprintf(&b, " Its question: %s Answer it with answer_task.", quote(clip(q.Question, 2000)))
	}
	return b.String()
}

// describeTask says in a sentence or two where a task stands.
func describeTask(t *api.Task) string {
	name := "Task " + t.ID + " " + quote(t.Title)
	switch t.Status {
	case errand.StatusCompleted:
		out := clip(api.ResultText(t.Result), maxSummaryOutput)
		if !hasResult(t) || out == "null" {
			return name + " completed without output."
		}
		return name + " completed. Output:\n" + out
	case errand.StatusFailed:
		return name + " failed" + reason(t.Error) + "."
	case errand.StatusCancelled:
		return name + " was cancelled" + reason(t.Error) + "."
	case errand.StatusInputRequired:
		return name + " is waiting for an answer."
	default:
		return name + " is " + taskState(t) + "."
	}
}

// taskState is a task's status with its progress, if any.
func taskState(t *api.Task) string {
	st := string(t.Status)
	if p := t.Progress; p != nil && p.TotalSteps > 0 {
		st += fmt.Sprintf(" (step %d of %d", p.CurrentStep, p.TotalSteps)
		if p.Label != "" {
			st += ": " + clip(p.Label, 200)
		}
		st += fmt.Sprintf(", %d%%)", p.Percentage)
	}
	return st
}

func reason(e *errand.TaskError) string {
	if e == nil {
		return ""
	}
	return ": " + clip(e.Code+": "+e.Message, 1000)
}

func describeList(list *api.TaskList) string {
	if len(list.Tasks) == 0 {
		return "No tasks."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d tasks, newest first:", len(list.Tasks))
	for _, t := range list.Tasks {
		fmt.Fprintf(&b, "\n- %s [%s] %s", t.ID, t.Status, clip(t.Title, 100))
	}
	if list.NextCursor != "" {
		fmt.Fprintf(&b, "\nMore with cursor %q.", list.NextCursor)
	}
	return b.String()
}

// quote puts s in quotation marks for a summary.
func quote(s string) string { return "“" + s + "”" }

// clip shortens s to at most n bytes, on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
