package telemetrytest

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// treeAttrs are the attributes Tree shows, in this order, under a short
// name.
var treeAttrs = []struct{ key, label string }{
	{"errand.task.id", "task"},
	{"errand.agent", "agent"},
	{"errand.attempt", "attempt"},
	{"errand.attempt.outcome", "outcome"},
	{"errand.attempt.lost", "lost"},
	{"errand.fork.source_task_id", "forked_from"},
	{"errand.step.number", "step"},
	{"errand.step.call_index", "call"},
	{"errand.step.type", "type"},
	{"errand.step.tool", "tool"},
	{"errand.step.status", "status"},
	{"errand.step.replayed", "replayed"},
	{"errand.subtasks.count", "subtasks"},
	{"errand.wait.for", "wait"},
	{"errand.wait.duration_ms", "wait_ms"},
	{"gen_ai.provider.name", "provider"},
	{"gen_ai.usage.input_tokens", "in"},
	{"gen_ai.usage.output_tokens", "out"},
	{"gen_ai.response.finish_reasons", "finish"},
}

// Tree is the spans as an indented tree, children under their parent in
// the order they started, each line the span's name, its duration and
// the attributes a reader looks for; span events follow as "· NAME".
// A span whose parent was not received is a root marked "(parent not
// received)". Each trace is introduced by its id.
func Tree(spans []Span) string {
	byID := map[string]bool{}
	kids := map[string][]Span{}
	for _, s := range spans {
		byID[s.SpanID] = true
	}
	var roots []Span
	for _, s := range spans {
		if s.ParentSpanID == "" || !byID[s.ParentSpanID] {
			roots = append(roots, s)
			continue
		}
		kids[s.ParentSpanID] = append(kids[s.ParentSpanID], s)
	}
	byStart := func(a, b Span) int {
		return cmp.Or(cmp.Compare(a.TraceID, b.TraceID), cmp.Compare(a.StartNano, b.StartNano), cmp.Compare(a.Name, b.Name))
	}
	slices.SortStableFunc(roots, byStart)
	var b strings.Builder
	var walk func(s Span, depth int)
	walk = func(s Span, depth int) {
		indent := strings.Repeat("  ", depth)
		fmt.Fprintf(&b, "%s%s  %s", indent, s.Name, duration(s))
		for _, a := range treeAttrs {
			if v, ok := s.Attrs[a.key]; ok {
				fmt.Fprintf(&b, " %s=%v", a.label, v)
			}
		}
		if s.StatusError {
			b.WriteString(" ERROR")
		}
		if s.ParentSpanID != "" && depth == 0 {
			b.WriteString(" (parent not received)")
		}
		b.WriteByte('\n')
		for _, ev := range s.Raw.GetEvents() {
			fmt.Fprintf(&b, "%s  · %s", indent, ev.GetName())
			for _, kv := range ev.GetAttributes() {
				fmt.Fprintf(&b, " %s=%v", kv.GetKey(), value(kv.GetValue()))
			}
			b.WriteByte('\n')
		}
		children := kids[s.SpanID]
		slices.SortStableFunc(children, byStart)
		for _, c := range children {
			walk(c, depth+1)
		}
	}
	trace := ""
	for _, r := range roots {
		if r.TraceID != trace {
			trace = r.TraceID
			fmt.Fprintf(&b, "trace %s\n", trace)
		}
		walk(r, 0)
	}
	return b.String()
}

// duration is how long s took, rounded for reading.
func duration(s Span) string {
	if s.EndNano < s.StartNano {
		return "?"
	}
	ns := s.EndNano - s.StartNano
	switch {
	case ns < 1e6:
		return fmt.Sprintf("%dµs", ns/1e3)
	case ns < 1e9:
		return fmt.Sprintf("%dms", ns/1e6)
	}
	return fmt.Sprintf("%.1fs", float64(ns)/1e9)
}
