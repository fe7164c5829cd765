// Package sqlval holds the small value conversions package store and both
// drivers write the same way: status lists spliced into SQL and JSON
// columns. It imports nothing of errand, so package store can use it too.
package sqlval

import (
	"encoding/json"
	"strings"
)

// StatusList renders statuses as an SQL list, e.g. 'pending', 'retry_scheduled'.
func StatusList[S ~string](statuses []S) string {
	quoted := make([]string, len(statuses))
	for i, s := range statuses {
		quoted[i] = "'" + string(s) + "'"
	}
	return strings.Join(quoted, ", ")
}

// JSONOr is the document b, or empty when b is empty.
func JSONOr(b json.RawMessage, empty string) string {
	if len(b) == 0 {
		return empty
	}
	return string(b)
}

// MarshalList is v as a JSON array; nil is [].
func MarshalList(v []string) string {
	if len(v) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(v) // a []string always marshals
	return string(b)
}

// NullPositive is n as a column value, NULL when n is not positive (a
// step number that was not recorded).
func NullPositive(n int) any {
	if n <= 0 {
		return nil
	}
	return int64(n)
}
