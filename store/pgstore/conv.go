package pgstore

import (
	"strings"
	"time"

	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/internal/sqlval"
)

// ceilMicro is t rounded up to the microsecond: the first stored time at or
// after t.
func ceilMicro(t time.Time) time.Time {
	if tr := t.Truncate(time.Microsecond); !tr.Equal(t) {
		return tr.Add(time.Microsecond)
	}
	return t
}

// fromDB reads a stored time: UTC, moved into the range every surface can
// write (see store.ClampTime).
func fromDB(t time.Time) time.Time { return store.ClampTime(t.UTC()) }

// fromNullDB reads a nullable stored time; NULL is the zero time.
func fromNullDB(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return fromDB(*t)
}

// toNull writes a time that may be unset: the zero time is NULL.
func toNull(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC().Truncate(time.Microsecond)
	return &t
}

// nullString writes "" as NULL.
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// nullJSON writes an empty document as NULL.
func nullJSON(b []byte) *string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	return &s
}

// The driver's other files call the value helpers by these names.
var (
	jsonOr      = sqlval.JSONOr
	marshalList = sqlval.MarshalList
)

// prefixed qualifies each of a comma-separated column list with prefix,
// for joins.
func prefixed(prefix, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = prefix + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}
