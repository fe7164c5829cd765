package memory

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/errandhq/errand/internal/taskrun"
	"github.com/errandhq/errand/store"
)

// RouteText is the text a task with the memory route leaves of its
// result's output: the string, or else the JSON text, made valid and cut
// to MaxTextBytes (the task did its work, and the start of it is still
// worth keeping); "" when there is none.
func RouteText(output json.RawMessage) string {
	out := bytes.TrimSpace(output)
	var text string
	switch {
	case len(out) == 0 || string(out) == "null":
	case out[0] == '"':
		_ = json.Unmarshal(out, &text)
	default:
		var buf bytes.Buffer
		if json.Compact(&buf, out) == nil {
			text = buf.String()
		}
	}
	text = strings.TrimSpace(strings.ReplaceAll(strings.ToValidUTF8(text, "\uFFFD"), "\x00", ""))
	if len(text) > MaxTextBytes {
		cut := MaxTextBytes - len("…")
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + "…"
	}
	return text
}

// RouteTags are the task's tags a routed memory keeps: the valid ones,
// each once, at most MaxTags.
func RouteTags(tags []string) []string {
	var out []string
	for _, tag := range tags {
		if len(out) < MaxTags && CheckTag(tag) == nil && !slices.Contains(out, tag) {
			out = append(out, tag)
		}
	}
	return out
}

// View is what an agent sees of a memory.
func View(m *store.Memory) *taskrun.MemoryView {
	v := &taskrun.MemoryView{
		ID: m.ID, Text: m.Text, Tags: m.Tags, Category: m.Category, Subject: m.Subject, Confidence: m.Confidence,
		Source: m.Source, TaskID: m.TaskID, Agent: m.Agent,
		EstimatedTokens: m.EstimatedTokens, CreatedAt: m.CreatedAt, RefreshedAt: m.RefreshedAt,
	}
	if m.Flagged != nil {
		v.Flagged = m.Flagged.Reason
	}
	return v
}
