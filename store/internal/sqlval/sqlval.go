// Package sqlval holds the small value conversions both drivers write the
// same way: status lists spliced into SQL and JSON columns.
package sqlval

import (
	"encoding/json"
	"strings"

	"github.com/errandhq/errand/store"
)

// StatusList renders statuses as an SQL list, e.g. 'pending', 'retry_scheduled'.
func StatusList(statuses []store.Status) string {
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
