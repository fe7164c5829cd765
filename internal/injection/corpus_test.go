package injection

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// corpusCase is one line of testdata/corpus.jsonl.
type corpusCase struct {
	Label string `json:"label"` // "injection" or "benign"
	Kind  string `json:"kind"`  // what the text is: direct, web, email, lang-de, obf-zw, docs, …
	Split string `json:"split"` // "dev": written while the rules were tuned; "heldout": written after
	Text  string `json:"text"`
}

func loadCorpus(t *testing.T) []corpusCase {
	t.Helper()
	f, err := os.Open("testdata/corpus.jsonl")
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	var cases []corpusCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var c corpusCase
		require.NoError(t, json.Unmarshal(sc.Bytes(), &c), "corpus.jsonl line %d", line)
		require.Contains(t, []string{"injection", "benign"}, c.Label, "line %d", line)
		require.Contains(t, []string{"dev", "heldout"}, c.Split, "line %d", line)
		cases = append(cases, c)
	}
	require.NoError(t, sc.Err())
	return cases
}

// score counts a confusion matrix.
type score struct{ tp, fp, tn, fn int }

func (s score) precision() float64 { return ratio(s.tp, s.tp+s.fp) }
func (s score) recall() float64    { return ratio(s.tp, s.tp+s.fn) }

func ratio(a, b int) float64 {
	if b == 0 {
		return 1
	}
	return float64(a) / float64(b)
}

func (s score) String() string {
	return fmt.Sprintf("precision %.3f recall %.3f (tp %d fp %d tn %d fn %d; %d injections, %d benign)",
		s.precision(), s.recall(), s.tp, s.fp, s.tn, s.fn, s.tp+s.fn, s.tn+s.fp)
}

// TestCorpus measures Classify on the hand-written corpus. The thresholds
// are the measured figures rounded down; the held-out part was written
// after the rules were frozen and is reported on its own.
func TestCorpus(t *testing.T) {
	t.Parallel()

	report := func(format string, args ...any) {
		t.Logf(format, args...)
		fmt.Printf(format+"\n", args...)
	}
	scores := map[string]*score{"dev": {}, "heldout": {}, "all": {}}
	for i, c := range loadCorpus(t) {
		v := Classify(c.Text)
		for _, k := range []string{c.Split, "all"} {
			s := scores[k]
			switch {
			case c.Label == "injection" && v.Flagged:
				s.tp++
			case c.Label == "injection":
				s.fn++
			case v.Flagged:
				s.fp++
			default:
				s.tn++
			}
		}
		text := c.Text
		if len(text) > 120 {
			text = text[:120] + "…"
		}
		switch {
		case c.Label == "injection" && !v.Flagged:
			report("MISS  #%d %s/%s %q", i+1, c.Split, c.Kind, text)
		case c.Label == "benign" && v.Flagged:
			report("FALSE #%d %s/%s %q: %s %v", i+1, c.Split, c.Kind, text, v.Reason, v.Rules)
		}
	}
	for _, k := range []string{"dev", "heldout", "all"} {
		report("%-8s %s", k, scores[k])
	}

	for _, th := range []struct {
		split             string
		precision, recall float64
	}{
		// Measured: dev 1.000/1.000 (the rules were tuned on it), held-out
		// precision 0.941, recall 0.800.
		{"dev", 0.98, 0.98},
		{"heldout", 0.90, 0.75},
	} {
		s := scores[th.split]
		require.GreaterOrEqual(t, s.precision(), th.precision, "%s precision", th.split)
		require.GreaterOrEqual(t, s.recall(), th.recall, "%s recall", th.split)
	}
}

var update = flag.Bool("update", false, "rewrite testdata/verdicts.golden")

// TestCorpusVerdicts pins the verdict of every corpus case: whether it is
// flagged and under which rule ids. A change to the rules or to how they
// are matched shows here case by case, not only in the figures.
func TestCorpusVerdicts(t *testing.T) {
	t.Parallel()

	const path = "testdata/verdicts.golden"
	var b strings.Builder
	b.WriteString("# Verdicts of Classify on corpus.jsonl, one line per case: its number,\n" +
		"# label, split and the rule ids it is flagged under (- when not flagged).\n" +
		"# TestCorpusVerdicts checks them; go test -run TestCorpusVerdicts -update\n" +
		"# rewrites the file after a deliberate change of the rules.\n")
	for i, c := range loadCorpus(t) {
		rules := "-"
		if v := Classify(c.Text); v.Flagged {
			rules = strings.Join(v.Rules, ",")
		}
		fmt.Fprintf(&b, "%d\t%s\t%s\t%s\n", i+1, c.Label, c.Split, rules)
	}
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), b.String())
}
