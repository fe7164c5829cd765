package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
)

// ANSI styles; each is used only when app.color says so.
const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiDim    = "\x1b[2m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiBlue   = "\x1b[34m"
	ansiPurple = "\x1b[35m"
	ansiCyan   = "\x1b[36m"
)

// style wraps s in an ANSI style when on is set.
func style(on bool, code, s string) string {
	if !on || code == "" {
		return s
	}
	return code + s + ansiReset
}

// statusColor is the colour a status is shown in.
func statusColor(s errand.Status) string {
	switch s {
	case errand.StatusRunning:
		return ansiCyan
	case errand.StatusCompleted:
		return ansiGreen
	case errand.StatusFailed:
		return ansiRed
	case errand.StatusCancelled:
		return ansiDim
	case errand.StatusInputRequired, errand.StatusPaused:
		return ansiYellow
	case errand.StatusRetryScheduled:
		return ansiPurple
	case errand.StatusBlocked, errand.StatusWaitingSubtasks:
		return ansiBlue
	}
	return ""
}

// table prints rows in aligned columns. Unlike text/tabwriter it measures
// cells by what they show, so coloured cells line up.
type table struct {
	indent string // before each row
	rows   [][]string
}

func (t *table) row(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) error {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], visibleWidth(c))
		}
	}
	var buf, line bytes.Buffer
	for _, r := range t.rows {
		line.Reset()
		line.WriteString(t.indent)
		for i, c := range r {
			line.WriteString(c)
			if i < len(r)-1 {
				line.WriteString(strings.Repeat(" ", widths[i]-visibleWidth(c)+2))
			}
		}
		buf.Write(bytes.TrimRight(line.Bytes(), " "))
		buf.WriteByte('\n')
	}
	_, err := w.Write(buf.Bytes())
	return err
}

var ansiRE = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// visibleWidth is the number of runes s shows.
func visibleWidth(s string) int {
	return utf8.RuneCountInString(ansiRE.ReplaceAllString(s, ""))
}

// truncate shortens s to n runes on one line, ending in … when cut.
func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// barWidth is the number of cells of a progress bar.
const barWidth = 10

// bar draws a percentage: [██████░░░░] 60%.
func bar(pct int) string {
	pct = min(max(pct, 0), 100)
	full := int(math.Round(float64(pct) * barWidth / 100))
	return "[" + strings.Repeat("█", full) + strings.Repeat("░", barWidth-full) + "] " + fmt.Sprintf("%d%%", pct)
}

// percentage of a progress report: its own, else its steps.
func percentage(p *errand.Progress) int {
	if p.Percentage > 0 || p.TotalSteps <= 0 {
		return p.Percentage
	}
	return p.CurrentStep * 100 / p.TotalSteps
}

// waiting reports whether a task waits on something other than a worker.
func waiting(s errand.Status) bool {
	switch s {
	case errand.StatusBlocked, errand.StatusWaitingSubtasks, errand.StatusInputRequired, errand.StatusPaused:
		return true
	}
	return false
}

// progressCell is a task's PROGRESS column.
func progressCell(t *api.Task) string {
	switch {
	case waiting(t.Status):
		return "waiting"
	case t.Progress == nil:
		return "-"
	}
	return bar(percentage(t.Progress))
}

// progressText is a progress report in words: [███░░] 60% Writing tests (3/5).
func progressText(p *errand.Progress) string {
	s := bar(percentage(p))
	if p.Label != "" {
		s += " " + p.Label
	}
	if p.TotalSteps > 0 {
		s += fmt.Sprintf(" (%d/%d)", p.CurrentStep, p.TotalSteps)
	}
	return s
}

// age is how long ago t was, in its largest unit: 45s, 3m, 2h, 5d.
func age(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d/time.Second), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

// taskTitle is a task's title, or its goal when it has none.
func taskTitle(t *api.Task) string {
	if t.Title != "" {
		return t.Title
	}
	return t.Goal
}

// printJSON writes v indented, on its own line.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// taskResult is a completed task's result: {"output": …, "warning": …}.
type taskResult struct {
	Output  json.RawMessage `json:"output"`
	Warning *string         `json:"warning"`
}

// printResult writes a result's output for people (api.ResultText) and
// returns its warning, if any.
func printResult(w io.Writer, result json.RawMessage) (warning string, err error) {
	if len(result) == 0 || string(result) == "null" {
		return "", nil
	}
	var r taskResult
	if json.Unmarshal(result, &r) == nil && len(r.Output) > 0 && r.Warning != nil {
		warning = *r.Warning
	}
	text := api.ResultText(result)
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	_, err = io.WriteString(w, text)
	return warning, err
}

// planItem is one entry of a task's plan.
type planItem struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Status string `json:"status"`
}

// planMark is the mark of a plan entry: ✓ completed, ▸ in progress, ○
// pending.
func planMark(status string) string {
	switch status {
	case "completed":
		return "✓"
	case "in_progress":
		return "▸"
	}
	return "○"
}

// money formats USD.
func money(usd float64) string {
	if usd != 0 && math.Abs(usd) < 0.01 {
		return fmt.Sprintf("$%.4f", usd)
	}
	return fmt.Sprintf("$%.2f", usd)
}

// duration formats milliseconds: 850ms, 1.2s, 3m4s.
func duration(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", ms)
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// compactJSON is raw JSON on one line, or "" for none.
func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" || string(raw) == "{}" {
		return ""
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}
