package dashboard

import (
	"cmp"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
)

// pageTemplates maps each page or fragment to the file that defines it;
// every page file is parsed with the layout.
var pageTemplates = map[string]string{
	"login": "login.html",
	"error": "error.html",
	"tasks": "tasks.html", "rows": "tasks.html",
	"task": "task.html", "task-live": "task.html",
	"queue":     "queue.html",
	"money":     "money.html",
	"schedules": "schedules.html",
	"memories":  "memories.html",
	"health":    "health.html",
}

func (d *Dashboard) parseTemplates() error {
	funcs := template.FuncMap{
		"percent":  percent,
		"age":      age,
		"cost":     func(v float64) string { return fmt.Sprintf("$%.4f", v) },
		"taskCost": taskCost,
		"pretty":   pretty,
		"statuses": func() []errand.Status { return errand.AllStatuses },
		"ended":    func(s errand.Status) bool { return s.Terminal() },
		"title":    taskTitle,
		"add":      func(a, b int) int { return a + b },
		"mul":      func(a, b int) int { return a * b },
		"planMark": planMark,
		"budget":   budgetText,
		"alert":    alertWhat,
		"alertsAt": thresholdsText,
		"held":     heldUSD,
		"share":    shareOf,
		"overlap":  overlapOf,
		"planWord": planWord,
		"conf":     confidenceText,
	}
	d.pages = map[string]*template.Template{}
	for name, file := range pageTemplates {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+file)
		if err != nil {
			return fmt.Errorf("dashboard templates: %w", err)
		}
		d.pages[name] = t
	}
	return nil
}

func percent(t *errand.Task) int {
	if t.Status == errand.StatusCompleted {
		return 100
	}
	if t.Progress == nil {
		return 0
	}
	return min(max(t.Progress.Percentage, 0), 100)
}

// age is how long ago t was, in one unit.
func age(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := max(now.Sub(t), 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(math.Floor(d.Hours()/24)))
}

func taskCost(t *errand.Task) float64 {
	if t.Consumed == nil {
		return 0
	}
	return t.Consumed.CostUSD
}

func taskTitle(t *errand.Task) string {
	s := cmp.Or(t.Title, t.Goal)
	if r := []rune(s); len(r) > 80 {
		return string(r[:79]) + "…"
	}
	return s
}

// resultView is a task's result for reading: its output as text when it
// is a JSON string, rendered as HTML too when that text is Markdown (see
// markdownHTML), else as indented JSON; and the result's other fields, if
// any, as indented JSON. The page shows the output once: HTML when set,
// else Text or JSON.
type resultView struct {
	Text string
	HTML template.HTML
	JSON string
	More string
}

// resultOf returns the result's view, or nil when it holds nothing to show.
// A result {"output": …} shows its output; anything else is the output.
func resultOf(raw json.RawMessage) *resultView {
	if len(raw) == 0 {
		return nil
	}
	out, v := raw, &resultView{}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) == nil {
		if o, ok := fields["output"]; ok {
			out = o
			delete(fields, "output")
			for k, f := range fields {
				if string(f) == "null" {
					delete(fields, k)
				}
			}
			if len(fields) > 0 {
				rest, err := json.Marshal(fields)
				if err == nil {
					v.More = pretty(rest)
				}
			}
		}
	}
	var s string
	if json.Unmarshal(out, &s) == nil {
		v.Text = s
		v.HTML = markdownHTML(s)
	} else {
		v.JSON = pretty(out)
	}
	if strings.TrimSpace(v.Text) == "" && v.JSON == "" && v.More == "" {
		return nil
	}
	return v
}

// sameArtifact reports whether a holds only t's output, as the daemon
// writes it (a title heading, then the output): the page then shows the
// output once.
func sameArtifact(a *artifact, t *errand.Task) bool {
	if a == nil {
		return false
	}
	want := "# " + t.Title + "\n\n" + api.ResultText(t.Result) + "\n"
	if a.Cut {
		return strings.HasPrefix(want, a.Text)
	}
	return a.Text == want
}

// pretty indents a JSON document for reading; anything else is shown as
// it is, and null or {} as nothing. The template escapes either.
func pretty(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	if m, ok := v.(map[string]any); v == nil || ok && len(m) == 0 {
		return "" // nothing worth a heading
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the template escapes; \u003c would show as such
	enc.SetIndent("", "  ")
	if enc.Encode(v) != nil {
		return string(raw)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// budgetText is a task's budget as a line: the limits it sets.
func budgetText(b *errand.Budget) string {
	var parts []string
	if b.MaxTokens > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens", b.MaxTokens))
	}
	if b.MaxCostUSD > 0 {
		parts = append(parts, fmt.Sprintf("$%.4f", b.MaxCostUSD))
	}
	if b.MaxToolCalls > 0 {
		parts = append(parts, fmt.Sprintf("%d tool calls", b.MaxToolCalls))
	}
	if b.MaxWallClock > 0 {
		parts = append(parts, time.Duration(b.MaxWallClock).String()+" wall clock")
	}
	return strings.Join(parts, " · ")
}
