package injection

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRequirements(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		pattern string
		want    [][]string
	}{
		{`ignore`, [][]string{{"ignore"}}},
		{`(?:ignore|forget)\s+(?:all|any)\s+rules?`, [][]string{{"forget", "ignore"}, {"rule"}, {"all", "any"}, {"\t", "\n", "\f", "\r", " "}}},
		{`you(?: must| should)? obey`, [][]string{{"you obey", "you must obe", "you should o"}}}, // cut to 12 bytes
		{`(?:abc|de\w+)x`, [][]string{{"de", "abc"}, {"x"}}},
		{`(?:foo)*bar?`, [][]string{{"ba"}}},
		{`[ab]{2,}\bzz|q`, [][]string{{"q", "zz"}, {"a", "b", "q"}}},
	} {
		require.Equal(t, tt.want, requirements(tt.pattern), tt.pattern)
	}
}

// TestRequirementsHold checks on the corpus and the rule table that every
// text a rule's regexp matches holds one literal of each of its sets.
func TestRequirementsHold(t *testing.T) {
	t.Parallel()

	reqs := make([][][]string, len(rules))
	for i := range rules {
		reqs[i] = requirements(rules[i].pattern)
	}
	for _, s := range equivalenceTexts(t, false) {
		v := fold(scanHidden(sanitize(s)).visible)
		for _, view := range []string{v.main, v.leet} {
			for i := range rules {
				r := &rules[i]
				if view == "" || !r.re.MatchString(view) {
					continue
				}
				for _, set := range reqs[i] {
					require.True(t, containsAny(view, set), "rule %d (%s) matches %.120q without one of %q", i, r.id, view, set)
				}
			}
		}
	}
}

func containsAny(s string, set []string) bool {
	for _, l := range set {
		if strings.Contains(s, l) {
			return true
		}
	}
	return false
}
