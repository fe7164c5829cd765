package config

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The checker walks the YAML tree alongside Config's type before anything
// is decoded, which yaml's own KnownFields cannot do well: it reports every
// unknown or duplicated key and every mistyped value, each with its key
// path and line, instead of stopping at the first or naming Go types. It
// prunes what it reports, so the rest still decodes and validates and the
// user sees every problem at once. It also drops keys set to null from
// structs, so null means "keep the default" everywhere. The decode that
// follows is yaml's, so the checker only has to be strict, not complete.

var (
	configType   = reflect.TypeFor[Config]()
	durationType = reflect.TypeFor[Duration]()
)

type seenKey struct {
	n *yaml.Node
	t reflect.Type
}

type checker struct {
	errs []error
	// seen bounds the work of aliases: a node is checked once per type
	// however often it is referenced.
	seen map[seenKey]checkState
}

type checkState int

const (
	stateUnseen checkState = iota
	stateChecking
	stateGood
	stateBad
)

func (c *checker) add(path string, line int, format string, args ...any) {
	c.errs = append(c.errs, &FieldError{Path: path, Line: line, Message: fmt.Sprintf(format, args...)})
}

// value checks n as a value of type t at path. It reports whether n can be
// decoded, after pruning.
func (c *checker) value(n *yaml.Node, t reflect.Type, path string) bool {
	n = deref(n)
	if n == nil {
		return false
	}
	k := seenKey{n, t}
	switch c.seen[k] {
	case stateGood:
		return true
	case stateBad:
		return false
	case stateChecking:
		// yaml parses "a: &a {<<: *a}" into a cycle; its decoder refuses it.
		c.add(path, n.Line, "an alias refers to the value that contains it")
		return false
	case stateUnseen:
	}
	c.seen[k] = stateChecking
	ok := c.check(n, t, path)
	c.seen[k] = stateBad
	if ok {
		c.seen[k] = stateGood
	}
	return ok
}

func (c *checker) check(n *yaml.Node, t reflect.Type, path string) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem() // an optional value (nil: absent) is checked as the value
	}
	// The types of schedules: that YAML writes as mappings of their own.
	switch {
	case t == anyJSONType:
		return c.anyJSON(n, path)
	case t == taskTemplateType:
		return c.asJSON(n, taskShapeType, path)
	case t == jsonObjectType:
		return c.asJSON(n, anyJSONMapType, path)
	case t == scheduleSpecType && n.Kind == yaml.MappingNode:
		return c.asJSON(n, eventSpecShapeType, path)
	}
	leaf := t == durationType || (t.Kind() != reflect.Struct && t.Kind() != reflect.Map && t.Kind() != reflect.Slice)
	if isNull(n) {
		if leaf {
			c.add(path, n.Line, "must not be null")
			return false
		}
		return true // an empty struct, map or list
	}
	switch {
	case leaf:
		return c.scalar(n, t, path)
	case t.Kind() == reflect.Struct:
		return c.structure(n, t, path)
	case t.Kind() == reflect.Map:
		return c.mapping(n, t, path)
	default:
		return c.sequence(n, t, path)
	}
}

// structure checks a mapping decoded into struct type t, dropping bad
// keys and null values.
func (c *checker) structure(n *yaml.Node, t reflect.Type, path string) bool {
	if n.Kind != yaml.MappingNode {
		c.add(path, n.Line, "must be a mapping")
		return false
	}
	fields := yamlFields(t)
	seen := map[string]int{}
	kept := make([]*yaml.Node, 0, len(n.Content))
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		if isMerge(key) {
			if c.merge(val, t, path) {
				kept = append(kept, key, val)
			}
			continue
		}
		if key.Kind != yaml.ScalarNode || isNull(key) {
			c.add(path, key.Line, "keys must be strings")
			continue
		}
		p := join(path, key.Value)
		if line, dup := seen[key.Value]; dup {
			c.add(p, key.Line, "set twice (first at line %d)", line)
			continue
		}
		seen[key.Value] = key.Line
		ft, ok := fields[key.Value]
		if !ok {
			msg := "unknown key"
			if s := suggest(key.Value, fields); s != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", s)
			}
			c.add(p, key.Line, "%s", msg)
			continue
		}
		if isNull(val) {
			continue // null keeps the default
		}
		if c.value(val, ft, p) {
			kept = append(kept, key, val)
		}
	}
	n.Content = kept
	return true
}

// mapping checks a mapping decoded into map type t, dropping bad entries.
func (c *checker) mapping(n *yaml.Node, t reflect.Type, path string) bool {
	if n.Kind != yaml.MappingNode {
		c.add(path, n.Line, "must be a mapping")
		return false
	}
	seen := map[string]int{}
	kept := make([]*yaml.Node, 0, len(n.Content))
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		if isMerge(key) {
			if c.merge(val, t, path) {
				kept = append(kept, key, val)
			}
			continue
		}
		if key.Kind != yaml.ScalarNode || isNull(key) || key.Value == "" {
			c.add(path, key.Line, "keys must be non-empty strings")
			continue
		}
		p := join(path, key.Value)
		if line, dup := seen[key.Value]; dup {
			c.add(p, key.Line, "set twice (first at line %d)", line)
			continue
		}
		seen[key.Value] = key.Line
		if c.value(val, t.Elem(), p) {
			kept = append(kept, key, val)
		}
	}
	n.Content = kept
	return true
}

// sequence checks a list decoded into slice type t. A bad element fails the
// whole list rather than shift the indexes of the rest.
func (c *checker) sequence(n *yaml.Node, t reflect.Type, path string) bool {
	if n.Kind != yaml.SequenceNode {
		c.add(path, n.Line, "must be a list")
		return false
	}
	ok := true
	for i, e := range n.Content {
		ok = c.value(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)) && ok
	}
	return ok
}

// merge checks the value of a "<<" merge key: a mapping, or a list of
// mappings, merged into a value of type t.
func (c *checker) merge(n *yaml.Node, t reflect.Type, path string) bool {
	n = deref(n)
	if n == nil {
		return false
	}
	items := []*yaml.Node{n}
	if n.Kind == yaml.SequenceNode {
		items = n.Content
	}
	for _, item := range items {
		if d := deref(item); d == nil || d.Kind != yaml.MappingNode {
			c.add(path, item.Line, "<< must merge a mapping or a list of mappings")
			return false
		}
	}
	ok := true
	for _, item := range items {
		ok = c.value(item, t, path) && ok
	}
	return ok
}

func (c *checker) scalar(n *yaml.Node, t reflect.Type, path string) bool {
	if n.Kind != yaml.ScalarNode {
		c.add(path, n.Line, "must be %s", describe(t))
		return false
	}
	tag := n.ShortTag()
	switch {
	case t == durationType:
		var d Duration
		if err := n.Decode(&d); err != nil {
			c.add(path, n.Line, "%s", err.Error())
			return false
		}
	case t.Kind() == reflect.String:
		// Any scalar reads as its text.
	case t.Kind() == reflect.Bool:
		var b bool
		if err := n.Decode(&b); err != nil {
			c.add(path, n.Line, "%q is not true or false", n.Value)
			return false
		}
	case t.Kind() == reflect.Int || t.Kind() == reflect.Int64:
		if tag != "!!int" || n.Decode(reflect.New(t).Interface()) != nil {
			c.add(path, n.Line, "%q is not an integer", n.Value)
			return false
		}
	case t.Kind() == reflect.Float64:
		if (tag != "!!int" && tag != "!!float") || n.Decode(reflect.New(t).Interface()) != nil {
			c.add(path, n.Line, "%q is not a number", n.Value)
			return false
		}
		if f := 0.0; t == finiteFloatType && (n.Decode(&f) != nil || math.IsNaN(f) || math.IsInf(f, 0)) {
			c.add(path, n.Line, "must be a finite number")
			return false
		}
	default:
		panic("config: no check for type " + t.String())
	}
	return true
}

// asJSON checks a value kept as JSON against its shape t, then that it
// converts: aliases may expand it past what JSON should hold.
func (c *checker) asJSON(n *yaml.Node, t reflect.Type, path string) bool {
	if !c.check(n, t, path) {
		return false
	}
	if _, err := yamlToJSON(n, t); err != nil {
		c.add(path, n.Line, "%s", err.Error())
		return false
	}
	return true
}

// anyJSON checks a value that may be any JSON: mappings with string keys,
// lists, and scalars, whose numbers must be finite.
func (c *checker) anyJSON(n *yaml.Node, path string) bool {
	switch n.Kind {
	case yaml.MappingNode:
		return c.mapping(n, anyJSONMapType, path)
	case yaml.SequenceNode:
		return c.sequence(n, anyJSONListType, path)
	}
	var v any
	if err := n.Decode(&v); err != nil {
		c.add(path, n.Line, "%s", err.Error())
		return false
	}
	if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
		c.add(path, n.Line, "%q is not a number JSON can hold", n.Value)
		return false
	}
	return true
}

func describe(t reflect.Type) string {
	switch {
	case t == scheduleSpecType:
		return "a string, or for kind event a mapping {type, match}"
	case t == durationType:
		return "a duration like 90s, 5m or 720h"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() == reflect.Float64:
		return "a number"
	default:
		return "an integer"
	}
}

// yamlFields maps the YAML keys of struct type t to their field types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			panic("config: field " + t.String() + "." + f.Name + " has no yaml key")
		}
		fields[name] = f.Type
	}
	return fields
}

// suggest returns the known key closest to an unknown one, or "".
func suggest(key string, fields map[string]reflect.Type) string {
	squash := strings.NewReplacer("_", "", "-", "", " ", "")
	names := slices.Sorted(maps.Keys(fields))
	for _, name := range names {
		if squash.Replace(strings.ToLower(key)) == squash.Replace(name) {
			return name
		}
	}
	if len(key) < 4 {
		return ""
	}
	best, bestDist := "", 3 // at most two edits away
	for _, name := range names {
		if d := distance(key, name); d < bestDist {
			best, bestDist = name, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// deref follows aliases to the node they name.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.AliasNode {
		return nil
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = deref(n)
	return n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// isMerge is yaml's own test for a "<<" merge key.
func isMerge(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Value == "<<" &&
		(n.Tag == "" || n.Tag == "!" || n.ShortTag() == "!!merge")
}
