package injection

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxScanBytes bounds the work Classify does on one text: a longer text is
// scanned in its first and last MaxScanBytes/2 bytes.
const MaxScanBytes = 256 << 10

const (
	// maxDepth bounds the recursion into decoded blobs and tag-character text.
	maxDepth = 2
	// flagScore is the total weight at which a text is flagged.
	flagScore = 2
)

// Verdict is what Classify says of one text.
type Verdict struct {
	// Flagged reports whether the text reads as instructions to a model.
	Flagged bool
	// Reason is a short, human-readable account of the strongest evidence,
	// such as "asks the model to ignore its instructions"; empty when not
	// flagged.
	Reason string
	// Rules holds the ids of the rules that matched, sorted, when Flagged;
	// nil otherwise. See the package doc for the ids.
	Rules []string
}

// Classify tells whether text reads as instructions to a model. It is
// deterministic and safe for any input, and its work is linear in
// min(len(text), MaxScanBytes).
func Classify(text string) Verdict {
	b := budget{decoded: maxDecodedBytes}
	return classify(text, 0, &b).verdict()
}

// budget is shared by one Classify call and its recursions.
type budget struct {
	decoded int // bytes of decoded blobs left to classify
	blobs   int // blobs looked at so far
}

// evidence accumulates the matches of one text.
type evidence struct {
	score  int
	best   int    // weight of the strongest match so far
	reason string // reason of the strongest match
	rules  []string
}

func (e *evidence) add(rule string, weight int, reason string) {
	if weight <= 0 {
		return
	}
	e.score += weight
	if weight > e.best {
		e.best, e.reason = weight, reason
	}
	if !slices.Contains(e.rules, rule) {
		e.rules = append(e.rules, rule)
	}
}

// addRules lists rule ids without weight: the rules of a decoded text.
func (e *evidence) addRules(rules []string) {
	for _, r := range rules {
		if !slices.Contains(e.rules, r) {
			e.rules = append(e.rules, r)
		}
	}
}

func (e *evidence) flagged() bool { return e.score >= flagScore }

func (e *evidence) verdict() Verdict {
	if !e.flagged() {
		return Verdict{}
	}
	rules := slices.Clone(e.rules)
	slices.Sort(rules)
	return Verdict{Flagged: true, Reason: e.reason, Rules: rules}
}

func classify(text string, depth int, b *budget) *evidence {
	var e evidence
	s := sanitize(bound(text))
	h := scanHidden(s)

	views := fold(h.visible)
	matchRules(&e, views)

	if h.weight > 0 {
		e.add("hidden_text", h.weight, h.reason)
	}
	if depth < maxDepth {
		if h.tagText != "" {
			if inner := classify(h.tagText, depth+1, b); inner.flagged() {
				e.add("hidden_text", flagScore, "hides instructions in invisible tag characters")
				e.addRules(inner.rules)
			}
		}
		for _, d := range decodeBlobs(h.visible, b) {
			if inner := classify(d, depth+1, b); inner.flagged() {
				e.add("encoded", flagScore, "hides instructions in an encoded blob ("+inner.reason+")")
				e.addRules(inner.rules)
				break
			}
		}
	}
	// Zero-width characters inside words count once other evidence is there:
	// they hid the words that matched.
	if h.inWord > 0 && e.score > 0 && e.score+1 >= flagScore {
		e.add("hidden_text", 1, "hides words with zero-width characters")
	}
	return &e
}

// bound cuts a text longer than MaxScanBytes to its head and tail.
func bound(s string) string {
	if len(s) <= MaxScanBytes {
		return s
	}
	half := MaxScanBytes / 2
	return s[:half] + "\n" + s[len(s)-half:]
}

// sanitize replaces invalid UTF-8 with U+FFFD and control characters other
// than tab and newline with spaces; CR becomes a newline.
func sanitize(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || (c < 0x20 && c != '\t' && c != '\n') || c == 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\r':
			return '\n'
		case r == '\t' || r == '\n':
			return r
		case r < 0x20 || (r >= 0x7f && r < 0xa0):
			return ' '
		}
		return r
	}, s)
}
