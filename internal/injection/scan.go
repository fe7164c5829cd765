package injection

import (
	"slices"
	"strings"
	"sync"
)

// The literal scan: one Aho-Corasick automaton over the literals of every
// rule's requirements (see literals.go) finds all their occurrences in a
// view in one pass. A rule's regexp then runs only on windows around an
// occurrence of its anchor set, and only when every other set of its
// requirements occurs inside the window too. Benign text rarely has all of
// a rule's words close together, so the regexps mostly do not run at all.

// litSet is one requirement of a rule: a match holds one of its literals.
type litSet struct {
	ids   []int32 // literals of two or more bytes, by id in the automaton
	bytes string  // one-byte literals
}

// reqs is the compiled requirement of one rule.
type reqs struct {
	anchor []int32  // literal ids a window is centred on
	sets   []litSet // every one must occur in the window
}

// automaton is a dense Aho-Corasick automaton over byte classes.
type automaton struct {
	class  [256]byte
	nclass int
	delta  []int32 // state*nclass + class -> next state*nclass, complemented (^) if it has outputs
	out    []int32 // out[outStart[s]:outStart[s+1]]: literal ids ending at state s
	outIdx []int32
	lits   []string
}

func newAutomaton(lits []string) *automaton {
	a := &automaton{lits: lits}
	// Byte classes: each byte used in a literal is its own class; the rest
	// share class 0.
	var used [256]bool
	for _, l := range lits {
		for i := 0; i < len(l); i++ {
			used[l[i]] = true
		}
	}
	a.nclass = 1
	for c := range 256 {
		if used[c] {
			a.class[c] = byte(a.nclass)
			a.nclass++
		}
	}
	// The trie.
	type node struct {
		next map[byte]int32
		out  []int32
	}
	nodes := []node{{next: map[byte]int32{}}}
	for id, l := range lits {
		s := int32(0)
		for i := 0; i < len(l); i++ {
			c := a.class[l[i]]
			n, ok := nodes[s].next[c]
			if !ok {
				n = int32(len(nodes))
				nodes = append(nodes, node{next: map[byte]int32{}})
				nodes[s].next[c] = n
			}
			s = n
		}
		nodes[s].out = append(nodes[s].out, int32(id))
	}
	// Breadth first: failure links, full transitions, merged outputs.
	nc := a.nclass
	a.delta = make([]int32, len(nodes)*nc)
	fail := make([]int32, len(nodes))
	queue := []int32{0}
	for c := range nc {
		if n, ok := nodes[0].next[byte(c)]; ok {
			a.delta[c] = n
			queue = append(queue, n)
		}
	}
	queue = queue[1:]
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		nodes[s].out = append(nodes[s].out, nodes[fail[s]].out...)
		for c := range nc {
			if n, ok := nodes[s].next[byte(c)]; ok {
				fail[n] = a.delta[int(fail[s])*nc+c]
				a.delta[int(s)*nc+c] = n
				queue = append(queue, n)
			} else {
				a.delta[int(s)*nc+c] = a.delta[int(fail[s])*nc+c]
			}
		}
	}
	a.outIdx = make([]int32, len(nodes)+1)
	for s := range nodes {
		a.out = append(a.out, nodes[s].out...)
		a.outIdx[s+1] = int32(len(a.out))
	}
	// Premultiply the states and mark those with outputs, so that the scan
	// does one load per byte.
	for k, n := range a.delta {
		a.delta[k] = n * int32(nc)
		if len(nodes[n].out) > 0 {
			a.delta[k] = ^a.delta[k]
		}
	}
	return a
}

// occurrences lists where each literal occurs in a view.
type occurrences struct {
	pos   []int32 // start positions, grouped by literal id
	first []int32 // literal id -> its positions are pos[first[id]:first[id+1]]
	tmp   []int32 // pairs (id, start) before grouping
	cur   []int32 // cursors of the grouping
}

var occPool = sync.Pool{New: func() any { return new(occurrences) }}

// scan finds every occurrence of every literal in s.
func (a *automaton) scan(s string, o *occurrences) {
	o.tmp = o.tmp[:0]
	nc := int32(a.nclass)
	delta, class := a.delta, &a.class
	state := int32(0) // premultiplied by nc
	for i := 0; i < len(s); i++ {
		state = delta[state+int32(class[s[i]])]
		if state < 0 {
			state = ^state
			q := state / nc
			for _, id := range a.out[a.outIdx[q]:a.outIdx[q+1]] {
				o.tmp = append(o.tmp, id, int32(i+1-len(a.lits[id])))
			}
		}
	}
	// Group by literal id (a counting sort keeps positions ascending).
	n := len(a.lits)
	o.first = slices.Grow(o.first[:0], n+1)[:n+1]
	clear(o.first)
	for k := 0; k < len(o.tmp); k += 2 {
		o.first[o.tmp[k]+1]++
	}
	for id := 1; id <= n; id++ {
		o.first[id] += o.first[id-1]
	}
	o.pos = slices.Grow(o.pos[:0], len(o.tmp)/2)[:len(o.tmp)/2]
	o.cur = slices.Grow(o.cur[:0], n)[:n]
	next := o.cur
	copy(next, o.first[:n])
	for k := 0; k < len(o.tmp); k += 2 {
		id := o.tmp[k]
		o.pos[next[id]] = o.tmp[k+1]
		next[id]++
	}
}

func (o *occurrences) of(id int32) []int32 { return o.pos[o.first[id]:o.first[id+1]] }

// within reports whether literal id occurs entirely inside s[lo:hi].
func (o *occurrences) within(id int32, n, lo, hi int) bool {
	ps := o.of(id)
	i, _ := slices.BinarySearch(ps, int32(lo))
	return i < len(ps) && int(ps[i])+n <= hi
}

// scanner is the compiled form of all rules' requirements.
type scanner struct {
	ac   *automaton
	reqs []reqs // by rule index
}

func newScanner(rs []rule) *scanner {
	ids := map[string]int32{}
	var lits []string
	id := func(l string) int32 {
		if i, ok := ids[l]; ok {
			return i
		}
		ids[l] = int32(len(lits))
		lits = append(lits, l)
		return ids[l]
	}
	sc := &scanner{reqs: make([]reqs, len(rs))}
	for k, r := range rs {
		sets := requirements(r.pattern)
		// The hand-written keys gate the rule as they always did (not cut
		// short: that would weaken the gate).
		if keys := minimal(r.keys); keys != nil {
			sets = append(sets, keys)
		}
		anchor := -1
		for i, s := range sets {
			if len(s[0]) >= minAnchor && (anchor < 0 || setCost(s) < setCost(sets[anchor])) {
				anchor = i
			}
		}
		if anchor < 0 {
			panic("injection: rule " + r.id + " has no literal to anchor on: " + r.pattern)
		}
		for i, s := range sets {
			var ls litSet
			for _, l := range s {
				if len(l) == 1 {
					ls.bytes += l
				} else {
					ls.ids = append(ls.ids, id(l))
				}
			}
			if i == anchor {
				sc.reqs[k].anchor = ls.ids
			} else {
				sc.reqs[k].sets = append(sc.reqs[k].sets, ls)
			}
		}
	}
	sc.ac = newAutomaton(lits)
	return sc
}

// has reports whether one literal of ls occurs inside s[lo:hi].
func (sc *scanner) has(ls *litSet, s string, o *occurrences, lo, hi int) bool {
	for _, id := range ls.ids {
		if o.within(id, len(sc.ac.lits[id]), lo, hi) {
			return true
		}
	}
	return ls.bytes != "" && strings.ContainsAny(s[lo:hi], ls.bytes)
}
