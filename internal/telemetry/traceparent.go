package telemetry

import (
	"bytes"
	"encoding/hex"
	"encoding/json"

	"go.opentelemetry.io/otel/trace"
)

// MetadataKey is the key of a task's metadata that keeps the W3C
// traceparent its submit carried: errand's own, read when the task runs
// so that every attempt, the one after a crash included, has the same
// parent.
const MetadataKey = "errand.traceparent"

// traceparentLen is the length of a version-00 traceparent:
// 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>.
const traceparentLen = 55

// ParseTraceparent reads a W3C traceparent header value. It reports false
// for anything the Trace Context recommendation says to ignore: a wrong
// length or separator, hex that is not lowercase, version ff, an all-zero
// trace or parent id, or a version 00 header with more after the flags.
// A later version may append fields after a dash, which are ignored.
func ParseTraceparent(s string) (trace.SpanContext, bool) {
	if len(s) < traceparentLen || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return trace.SpanContext{}, false
	}
	var version [1]byte
	var flags [1]byte
	var tid trace.TraceID
	var sid trace.SpanID
	if !lowerHex(version[:], s[0:2]) || version[0] == 0xff ||
		!lowerHex(tid[:], s[3:35]) || !lowerHex(sid[:], s[36:52]) || !lowerHex(flags[:], s[53:55]) {
		return trace.SpanContext{}, false
	}
	if len(s) > traceparentLen && (version[0] == 0 || s[traceparentLen] != '-') {
		return trace.SpanContext{}, false
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags[0]) & trace.FlagsSampled, Remote: true,
	})
	if !sc.IsValid() {
		return trace.SpanContext{}, false
	}
	return sc, true
}

// lowerHex decodes s into dst, refusing upper-case hex.
func lowerHex(dst []byte, s string) bool {
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	_, err := hex.Decode(dst, []byte(s))
	return err == nil
}

// FormatTraceparent is the version-00 traceparent of sc.
func FormatTraceparent(sc trace.SpanContext) string {
	tid, sid := sc.TraceID(), sc.SpanID()
	return "00-" + hex.EncodeToString(tid[:]) + "-" + hex.EncodeToString(sid[:]) + "-" + hex.EncodeToString([]byte{byte(sc.TraceFlags())})
}

// WithTraceparent returns metadata (a JSON object, or empty) with the
// traceparent header value kept under MetadataKey, so that the task's
// run becomes a child of the caller's span. Metadata is returned as it
// is when the header is not a valid traceparent, when metadata is not an
// object, or when it already has the key: only a valid header changes
// what is written, and then only by that key, put first so the caller's
// keys keep their order and spelling.
func WithTraceparent(metadata json.RawMessage, header string) json.RawMessage {
	sc, ok := ParseTraceparent(header)
	if !ok {
		return metadata
	}
	entry := `"` + MetadataKey + `":"` + FormatTraceparent(sc) + `"`
	trimmed := bytes.TrimSpace(metadata)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return json.RawMessage("{" + entry + "}")
	}
	if trimmed[0] != '{' || !json.Valid(trimmed) {
		return metadata
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(trimmed, &obj) != nil {
		return metadata
	}
	if _, has := obj[MetadataKey]; has {
		return metadata
	}
	out := make([]byte, 0, len(trimmed)+len(entry)+1)
	out = append(out, '{')
	out = append(out, entry...)
	if len(obj) > 0 {
		out = append(out, ',')
	}
	return append(out, trimmed[1:]...)
}

// metadataParent is the parent a task's metadata keeps, if any.
func metadataParent(metadata json.RawMessage) (trace.SpanContext, bool) {
	if len(metadata) == 0 || !bytes.Contains(metadata, []byte(MetadataKey)) {
		return trace.SpanContext{}, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(metadata, &m) != nil {
		return trace.SpanContext{}, false
	}
	var tp string
	if json.Unmarshal(m[MetadataKey], &tp) != nil {
		return trace.SpanContext{}, false
	}
	return ParseTraceparent(tp)
}
