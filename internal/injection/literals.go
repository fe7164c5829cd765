package injection

import (
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"
)

// Literal requirements: for each rule, sets of literal strings derived from
// its pattern such that every match of the pattern contains at least one
// string of each set. They are necessary, never sufficient: a window of
// text that lacks one of the sets cannot hold a match, so the regexp is not
// run there. They are computed from the parsed pattern, not written by
// hand, so they cannot drift from it.

const (
	// maxExact bounds the set of strings tracked for a sub-pattern that
	// matches only finitely many strings.
	maxExact = 128
	// minAnchor is the shortest literal a rule's windows are anchored on;
	// shorter ones only confirm a window.
	minAnchor = 2
)

// litInfo is what requirements knows of one sub-pattern.
type litInfo struct {
	exact []string   // every string the sub-pattern matches; nil if unknown or too many
	and   [][]string // each match contains a string of each set
}

// requirements returns the literal sets every match of pattern contains,
// the most selective first.
func requirements(pattern string) [][]string {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		panic(err)
	}
	info := analyze(re)
	sets := info.and
	if info.exact != nil {
		sets = append(sets, info.exact)
	}
	var out [][]string
	for _, s := range sets {
		if s = minimizeSet(s); s != nil && !slices.ContainsFunc(out, func(o []string) bool { return slices.Equal(o, s) }) {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b []string) int { return setCost(a) - setCost(b) })
	return out
}

// minimizeSet cuts the strings of a set to maxLiteral bytes and drops
// those that contain another string of the set (the shorter one is the
// weaker, still necessary condition). It returns nil when the set is
// useless: empty, or holding the empty string.
func minimizeSet(set []string) []string {
	s := make([]string, len(set))
	for i, x := range set {
		s[i] = truncLiteral(x)
	}
	return minimal(s)
}

// minimal drops the strings of set that contain another one.
func minimal(set []string) []string {
	if len(set) == 0 {
		return nil
	}
	s := slices.Clone(set)
	slices.SortFunc(s, func(a, b string) int {
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	})
	s = slices.Compact(s)
	if s[0] == "" {
		return nil
	}
	var out []string
	for _, x := range s {
		if !slices.ContainsFunc(out, func(o string) bool { return strings.Contains(x, o) }) {
			out = append(out, x)
		}
	}
	return out
}

// maxLiteral bounds the length of a searched literal: a prefix of a
// necessary string is necessary too, and short ones keep the set small.
const maxLiteral = 12

func truncLiteral(x string) string {
	if len(x) <= maxLiteral {
		return x
	}
	n := maxLiteral
	for n > 0 && !utf8.RuneStart(x[n]) {
		n--
	}
	return x[:n]
}

// setCost estimates how often a set's strings occur in ordinary text: short
// strings are common, long ones rare.
func setCost(set []string) int {
	c := 0
	for _, s := range set {
		switch n := len(s); {
		case n == 1:
			c += 5000
		case n == 2:
			c += 1000
		case n == 3:
			c += 200
		case n == 4:
			c += 40
		default:
			c += 10
		}
	}
	return c
}

// sets returns the useful sets info guarantees, the cheapest first.
func (i litInfo) sets() [][]string {
	cands := i.and
	if i.exact != nil {
		cands = append(slices.Clip(cands), i.exact)
	}
	var out [][]string
	for _, s := range cands {
		if s = minimizeSet(s); s != nil {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b []string) int { return setCost(a) - setCost(b) })
	return out
}

func anything() litInfo { return litInfo{} }

func emptyString() litInfo { return litInfo{exact: []string{""}} }

func analyze(re *syntax.Regexp) litInfo {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return anything()
		}
		return litInfo{exact: []string{string(re.Rune)}}
	case syntax.OpCharClass:
		if re.Flags&syntax.FoldCase != 0 {
			return anything()
		}
		var set []string
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			if hi-lo >= 8 || len(set) > 8 {
				return anything()
			}
			for r := lo; r <= hi; r++ {
				set = append(set, string(r))
			}
		}
		return litInfo{exact: set}
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText,
		syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return emptyString()
	case syntax.OpCapture:
		return analyze(re.Sub[0])
	case syntax.OpQuest:
		sub := analyze(re.Sub[0])
		if sub.exact != nil && len(sub.exact) < maxExact {
			return litInfo{exact: append(slices.Clone(sub.exact), "")}
		}
		return anything()
	case syntax.OpStar:
		return anything()
	case syntax.OpPlus:
		return atLeastOnce(analyze(re.Sub[0]))
	case syntax.OpRepeat:
		switch {
		case re.Min == 0 && re.Max == 1:
			return analyze(&syntax.Regexp{Op: syntax.OpQuest, Sub: re.Sub})
		case re.Min == 0:
			return anything()
		case re.Min == 1 && re.Max == 1:
			return analyze(re.Sub[0])
		}
		return atLeastOnce(analyze(re.Sub[0]))
	case syntax.OpConcat:
		return concat(re.Sub)
	case syntax.OpAlternate:
		return alternate(re.Sub)
	}
	return anything() // OpAnyChar, OpAnyCharNotNL, OpNoMatch
}

// atLeastOnce is what one or more repetitions of sub guarantee.
func atLeastOnce(sub litInfo) litInfo {
	and := slices.Clone(sub.and)
	if sub.exact != nil {
		and = append(and, sub.exact)
	}
	return litInfo{and: and}
}

func concat(subs []*syntax.Regexp) litInfo {
	var out litInfo
	cur := []string{""} // exact strings of the subs since the last flush
	flush := func() {
		if cur != nil {
			out.and = append(out.and, cur)
		}
	}
	for _, s := range subs {
		i := analyze(s)
		out.and = append(out.and, i.and...)
		if cur != nil && i.exact != nil && len(cur)*len(i.exact) <= maxExact {
			next := make([]string, 0, len(cur)*len(i.exact))
			for _, a := range cur {
				for _, b := range i.exact {
					next = append(next, a+b)
				}
			}
			cur = next
			continue
		}
		flush()
		cur = i.exact
	}
	if len(out.and) == 0 && cur != nil {
		out.exact = cur
		return out
	}
	flush()
	return out
}

func alternate(subs []*syntax.Regexp) litInfo {
	infos := make([]litInfo, len(subs))
	exact := true
	var all []string
	for k, s := range subs {
		infos[k] = analyze(s)
		if infos[k].exact == nil {
			exact = false
		}
		all = append(all, infos[k].exact...)
	}
	if exact && len(all) <= maxExact {
		return litInfo{exact: all}
	}
	// Each branch guarantees some sets; any choice of one set per branch
	// gives a set the alternation guarantees. Take the cheapest, the
	// second cheapest, … of each branch.
	ranked := make([][][]string, len(infos))
	for k, i := range infos {
		ranked[k] = i.sets()
		if len(ranked[k]) == 0 {
			return anything()
		}
	}
	var out litInfo
	for n := 0; n < 3; n++ {
		var union []string
		for _, r := range ranked {
			union = append(union, r[min(n, len(r)-1)]...)
		}
		out.and = append(out.and, union)
	}
	return out
}
