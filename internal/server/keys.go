package server

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"
)

// checkKeys refuses object keys that encoding/json would accept but the
// API does not name: a key in other case ("Goal") and a key given twice.
// It walks the objects that decode into structs, at any depth; values of
// other kinds are skipped. The JSON is known to be well formed.
func checkKeys(data []byte, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == reflect.TypeFor[json.RawMessage]() {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil // not an object: the decoder says what is wrong
	}
	fields := jsonFields(t)
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil
		}
		field, ok := fields[key]
		switch {
		case !ok:
			return malformed(path+key, "unknown field %q", path+key)
		case seen[key]:
			return malformed(path+key, "field %q is given twice", path+key)
		}
		seen[key] = true
		if err := checkKeys(value, field, path+key+"."); err != nil {
			return err
		}
	}
	return nil
}

// jsonFields maps a struct's JSON names to their types. The fields of an
// embedded struct without a JSON name are its own, as encoding/json has
// them (the outer struct's win).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			embedded = append(embedded, f.Type)
			continue
		}
		if !f.IsExported() {
			continue
		}
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		fields[name] = f.Type
	}
	for _, e := range embedded {
		for name, ft := range jsonFields(e) {
			if _, ok := fields[name]; !ok {
				fields[name] = ft
			}
		}
	}
	return fields
}

// checkUTF8 refuses a body whose strings are not valid UTF-8: raw invalid
// bytes, or an escaped lone surrogate ("\ud800"). encoding/json would
// quietly turn either into U+FFFD, storing text the client never sent. The
// JSON is known to be well formed.
func checkUTF8(body []byte) error {
	if utf8.Valid(body) && !bytes.Contains(bytes.ToLower(body), []byte(`\ud`)) {
		return nil
	}
	type level struct {
		object bool
		key    string // the key whose value comes next (objects)
		index  int    // the next element's index (arrays)
		atKey  bool
	}
	var stack []*level
	path := func(key bool) string {
		var b strings.Builder
		for i, l := range stack {
			last := i == len(stack)-1
			switch {
			case l.object && last && key:
			case l.object:
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(l.key)
			default:
				fmt.Fprintf(&b, "[%d]", l.index)
			}
		}
		return b.String()
	}
	// value moves the innermost level past one value.
	value := func() {
		if len(stack) == 0 {
			return
		}
		if l := stack[len(stack)-1]; l.object {
			l.atKey = true
		} else {
			l.index++
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil // io.EOF, or a syntax error the decoder reports
		}
		switch tok := tok.(type) {
		case json.Delim:
			switch tok {
			case '{', '[':
				stack = append(stack, &level{object: tok == '{', atKey: true})
			default:
				stack = stack[:len(stack)-1]
				value()
			}
		case string:
			raw := body[start:dec.InputOffset()]
			raw = raw[bytes.IndexByte(raw, '"'):]
			isKey := len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].atKey
			if !validJSONString(raw) {
				field := path(isKey)
				if isKey {
					return malformed(field, "a key in %s is not valid UTF-8", cmp.Or(field, "the body"))
				}
				return malformed(field, "%s is not valid UTF-8", cmp.Or(field, "the body"))
			}
			if isKey {
				l := stack[len(stack)-1]
				l.key, l.atKey = tok, false
				continue
			}
			value()
		default:
			value()
		}
	}
}

// validJSONString reports whether a quoted JSON string holds valid UTF-8
// and no escaped lone surrogate.
func validJSONString(quoted []byte) bool {
	if !utf8.Valid(quoted) {
		return false
	}
	for i := 0; i < len(quoted); i++ {
		if quoted[i] != '\\' {
			continue
		}
		i++
		if i >= len(quoted) || quoted[i] != 'u' {
			continue
		}
		r, ok := hex4(quoted[i+1:])
		if !ok {
			return false
		}
		i += 4
		switch {
		case r >= 0xdc00 && r <= 0xdfff:
			return false // a low surrogate with no high one before it
		case r >= 0xd800 && r <= 0xdbff:
			if i+2 >= len(quoted) || quoted[i+1] != '\\' || quoted[i+2] != 'u' {
				return false
			}
			low, ok := hex4(quoted[i+3:])
			if !ok || low < 0xdc00 || low > 0xdfff {
				return false
			}
			i += 6
		}
	}
	return true
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
