package server

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
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

// jsonFields maps a struct's JSON names to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		fields[name] = f.Type
	}
	return fields
}
