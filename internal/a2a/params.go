package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// The params of the methods whose shapes are not a wire type. Each
// declares every field its version's spec gives it, read or not: a
// field not declared is refused (see decodeParams).
type (
	// v1CancelParams are CancelTask's (CancelTaskRequest).
	v1CancelParams struct {
		Tenant   string          `json:"tenant"`
		ID       string          `json:"id"`
		Metadata json.RawMessage `json:"metadata"`
	}
	// v1SubscribeParams are SubscribeToTask's.
	v1SubscribeParams struct {
		Tenant string `json:"tenant"`
		ID     string `json:"id"`
	}
	// v1PushTarget names one push config (Get and
	// DeleteTaskPushNotificationConfig).
	v1PushTarget struct {
		Tenant string `json:"tenant"`
		TaskID string `json:"taskId"`
		ID     string `json:"id"`
	}
	// v1PushListParams are ListTaskPushNotificationConfigs'.
	v1PushListParams struct {
		Tenant    string `json:"tenant"`
		TaskID    string `json:"taskId"`
		PageSize  int32  `json:"pageSize"`
		PageToken string `json:"pageToken"`
	}
	// v1CardParams are GetExtendedAgentCard's.
	v1CardParams struct {
		Tenant string `json:"tenant"`
	}

	// v03TaskQueryParams are tasks/get's (TaskQueryParams).
	v03TaskQueryParams struct {
		ID            string          `json:"id"`
		HistoryLength *int32          `json:"historyLength"`
		Metadata      json.RawMessage `json:"metadata"`
	}
	// v03TaskIDParams are tasks/cancel's, tasks/resubscribe's and
	// tasks/pushNotificationConfig/list's (TaskIdParams).
	v03TaskIDParams struct {
		ID       string          `json:"id"`
		Metadata json.RawMessage `json:"metadata"`
	}
	// v03CardParams are agent/getAuthenticatedExtendedCard's: none.
	v03CardParams struct{}
)

// decodeParams reads req's params into v, a pointer to the method's
// params: an empty params object is fine, a field v does not have is not.
// Either version's spec lists the fields of each method; a client that
// sends one of the other version's (pushNotificationConfig to v1.0's
// SendMessage), or one misspelt, would otherwise see it ignored without
// a word: its push config never made, its option never applied.
func decodeParams(req *request, v any) *rpcError {
	params := req.params
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	if path, key, known, ok := unknownField(params, reflect.TypeOf(v), ""); ok {
		e := invalidParams(path, "unknown field: here %s (A2A %s) takes %s%s",
			req.name, req.method.dialect.version(), fieldList(known), otherVersionHint(req.method.dialect, key))
		return e
	}
	if err := json.Unmarshal(params, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return invalidParams(te.Field, "must be a JSON %s, not %s", jsonKind(te.Type.Kind().String()), te.Value)
		}
		return invalidParams("params", "%v", jsonProblem(err))
	}
	return nil
}

// unknownField finds, in data decoded as t, the first object key that
// names no field of its struct (matched as encoding/json matches, case
// folded). It returns the key's path (key clipped), the key, and the
// field names the struct has, and whether there is one. Free
// JSON (json.RawMessage, maps, interfaces) is not looked into, and a
// value of the wrong JSON type is left for json.Unmarshal to refuse.
func unknownField(data []byte, t reflect.Type, path string) (string, string, []string, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	data = bytes.TrimSpace(data)
	switch {
	case t == rawMessageType || len(data) == 0:
		return "", "", nil, false
	case t.Kind() == reflect.Struct && data[0] == '{':
		fields := fieldsOf(t)
		dec := json.NewDecoder(bytes.NewReader(data))
		if _, err := dec.Token(); err != nil { // {
			return "", "", nil, false
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return "", "", nil, false
			}
			key, _ := tok.(string)
			var value json.RawMessage
			if err := dec.Decode(&value); err != nil {
				return "", "", nil, false
			}
			ft, ok := fields.lookup(key)
			if !ok {
				shown := clip(key, maxEchoBytes)
				if shown == "" {
					shown = `""`
				}
				return join(path, shown), key, fields.names, true
			}
			if p, k, known, found := unknownField(value, ft, join(path, fields.name(key))); found {
				return p, k, known, true
			}
		}
	case t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8 && data[0] == '[':
		var items []json.RawMessage
		if json.Unmarshal(data, &items) != nil {
			return "", "", nil, false
		}
		for i, item := range items {
			if p, k, known, found := unknownField(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); found {
				return p, k, known, true
			}
		}
	}
	return "", "", nil, false
}

// maxEchoBytes bounds how much of a client's field name an error repeats.
const maxEchoBytes = 64

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// structFields are the JSON names of a struct's fields and their types.
type structFields struct {
	names []string // sorted
	types map[string]reflect.Type
}

// lookup finds key as encoding/json does: the exact name, else one equal
// to it under case folding.
func (f *structFields) lookup(key string) (reflect.Type, bool) {
	if t, ok := f.types[key]; ok {
		return t, true
	}
	for _, n := range f.names {
		if strings.EqualFold(n, key) {
			return f.types[n], true
		}
	}
	return nil, false
}

// name is the declared name key matches.
func (f *structFields) name(key string) string {
	if _, ok := f.types[key]; ok {
		return key
	}
	for _, n := range f.names {
		if strings.EqualFold(n, key) {
			return n
		}
	}
	return key
}

var fieldCache sync.Map // reflect.Type → *structFields

func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	f := &structFields{types: map[string]reflect.Type{}}
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		f.types[name] = sf.Type
		f.names = append(f.names, name)
	}
	slices.Sort(f.names)
	fieldCache.Store(t, f)
	return f
}

func fieldList(names []string) string {
	switch len(names) {
	case 0:
		return "no fields"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// otherVersionHint says which version a field the request's version does
// not have belongs to, for the names the two versions spell apart.
func otherVersionHint(d dialect, key string) string {
	hints := map[string]string{
		"pushNotificationConfig":   "; pushNotificationConfig is A2A 0.3's name (message/send), A2A 1.0's is taskPushNotificationConfig",
		"blocking":                 "; blocking is A2A 0.3's, A2A 1.0 has returnImmediately",
		"kind":                     "; kind is A2A 0.3's, A2A 1.0's messages and parts have none",
		"pushNotificationConfigId": "; pushNotificationConfigId is A2A 0.3's, A2A 1.0 names a push config by id and its task by taskId",
	}
	if d == dialectV03 {
		hints = map[string]string{
			"taskPushNotificationConfig": "; taskPushNotificationConfig is A2A 1.0's name (SendMessage), A2A 0.3's is pushNotificationConfig",
			"returnImmediately":          "; returnImmediately is A2A 1.0's, A2A 0.3 has blocking",
			"tenant":                     "; tenant is A2A 1.0's",
		}
	}
	return hints[key]
}
