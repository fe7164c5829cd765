package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// yamlToJSON converts a checked YAML value read as type t (a shape type)
// to compact JSON with sorted keys. Strings are a scalar's text, as
// everywhere in the file; anyJSON values keep the types YAML gives them.
func yamlToJSON(n *yaml.Node, t reflect.Type) ([]byte, error) {
	conv := &converter{budget: maxJSONValues}
	v, err := conv.value(n, t, 0)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// Bounds of a value converted to JSON: its nesting, as encoding/json
// bounds what it decodes, and how many values it holds once aliases are
// expanded, so that a few lines of aliases cannot expand to gigabytes.
const (
	maxJSONDepth  = 10000
	maxJSONValues = 100000
)

// The errors of a value past maxJSONValues or maxJSONDepth.
var (
	errTooLarge = fmt.Errorf("holds more than %d values once aliases are expanded", maxJSONValues)
	errTooDeep  = fmt.Errorf("nests more than %d deep", maxJSONDepth)
)

// converter converts YAML to JSON values within a budget of values.
type converter struct{ budget int }

func (c *converter) value(n *yaml.Node, t reflect.Type, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, errTooDeep
	}
	if c.budget--; c.budget < 0 {
		return nil, errTooLarge
	}
	n = deref(n)
	if n == nil {
		return nil, errors.New("an alias refers to itself")
	}
	if isNull(n) {
		return nil, nil
	}
	switch {
	case t == anyJSONType:
		switch n.Kind {
		case yaml.MappingNode:
			return c.value(n, anyJSONMapType, depth+1)
		case yaml.SequenceNode:
			return c.value(n, anyJSONListType, depth+1)
		}
		if n.ShortTag() == "!!timestamp" {
			return n.Value, nil // as written, not as a time.Time would print
		}
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, err
		}
		if f, ok := v.(float64); ok {
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, fmt.Errorf("%q is not a number JSON can hold", n.Value)
			}
			v = plusZero(f)
		}
		return v, nil
	case t == durationType:
		var d Duration
		if err := n.Decode(&d); err != nil {
			return nil, err
		}
		return d.String(), nil
	case t.Kind() == reflect.Struct:
		fields := yamlFields(t)
		return c.object(n, func(key string) (reflect.Type, bool) {
			ft, ok := fields[key]
			return ft, ok
		}, true, depth)
	case t.Kind() == reflect.Map:
		return c.object(n, func(string) (reflect.Type, bool) { return t.Elem(), true }, false, depth)
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return nil, errors.New("must be a list")
		}
		out := make([]any, 0, len(n.Content))
		for _, e := range n.Content {
			v, err := c.value(e, t.Elem(), depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	v := reflect.New(t)
	if err := n.Decode(v.Interface()); err != nil {
		return nil, err
	}
	if v.Elem().Kind() == reflect.Float64 {
		f := v.Elem().Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%q is not a number JSON can hold", n.Value)
		}
		return plusZero(f), nil
	}
	return v.Elem().Interface(), nil
}

// plusZero turns -0 into 0, which JSON writes as 0, as a round trip
// through YAML would.
func plusZero(f float64) float64 {
	if f == 0 {
		return 0
	}
	return f
}

// object converts a mapping, with YAML's merge keys: a key of the
// mapping itself wins over a merged one, and an earlier merged mapping
// over a later one. In a struct shape (skipNull) a null value is absent.
func (c *converter) object(n *yaml.Node, elem func(string) (reflect.Type, bool), skipNull bool, depth int) (map[string]any, error) {
	if n.Kind != yaml.MappingNode {
		return nil, errors.New("must be a mapping")
	}
	out := map[string]any{}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		if isMerge(key) {
			merges = append(merges, val)
			continue
		}
		t, ok := elem(key.Value)
		if !ok {
			return nil, fmt.Errorf("%s: unknown key", key.Value)
		}
		if _, dup := out[key.Value]; dup {
			return nil, fmt.Errorf("%s: set twice", key.Value)
		}
		if skipNull && isNull(val) {
			continue
		}
		v, err := c.value(val, t, depth+1)
		if errors.Is(err, errTooLarge) || errors.Is(err, errTooDeep) {
			return nil, err // about the whole value, not this key
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", key.Value, err)
		}
		out[key.Value] = v
	}
	for _, m := range merges {
		m = deref(m)
		if m == nil {
			return nil, errors.New("an alias refers to itself")
		}
		items := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			items = m.Content
		}
		for _, item := range items {
			item = deref(item)
			if item == nil || depth > maxJSONDepth {
				return nil, errors.New("<< must merge a mapping or a list of mappings")
			}
			sub, err := c.object(item, elem, skipNull, depth+1)
			if err != nil {
				return nil, err
			}
			for k, v := range sub {
				if _, ok := out[k]; !ok {
					out[k] = v
				}
			}
		}
	}
	return out, nil
}

// jsonToNode is the YAML node of a JSON value decoded with UseNumber.
func jsonToNode(v any) *yaml.Node {
	switch v := v.(type) {
	case map[string]any:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for _, k := range sortedKeys(v) {
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, jsonToNode(v[k]))
		}
		return n
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, e := range v {
			n.Content = append(n.Content, jsonToNode(e))
		}
		return n
	case json.Number:
		tag := "!!float"
		if _, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			tag = "!!int"
		} else if _, err := strconv.ParseUint(string(v), 10, 64); err == nil {
			tag = "!!int"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: string(v)}
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}
	default:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	}
}
