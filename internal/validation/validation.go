// Package validation holds the error every check of a request returns: the
// field at fault and why. The engine and the scheduler both refuse
// requests with it, so a face maps one type to its 400 or 422.
package validation

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// ErrInvalid is matched (errors.Is) by every *Error.
var ErrInvalid = errors.New("errand: invalid request")

// Error names the field of a request that is wrong and why. Nothing was
// written.
type Error struct {
	Field   string
	Message string
	// Unprocessable marks a well-formed request that cannot be carried
	// out as it stands: an unknown agent or task id, a dependency cycle, a
	// subtree too deep (HTTP 422 rather than 400).
	Unprocessable bool
}

func (e *Error) Error() string {
	if e.Field == "" {
		return "errand: invalid request: " + e.Message
	}
	return "errand: invalid " + e.Field + ": " + e.Message
}

// Is makes errors.Is(err, ErrInvalid) hold.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Invalid is an *Error for field, its message formatted.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Unprocessable is Invalid for a request well formed but not doable.
func Unprocessable(field, format string, args ...any) *Error {
	return &Error{Field: field, Message: fmt.Sprintf(format, args...), Unprocessable: true}
}

// PrefixField names a field inside another (a template's "task"): an
// *Error's field becomes prefix.field; other errors pass unchanged.
func PrefixField(prefix string, err error) error {
	var v *Error
	if errors.As(err, &v) {
		out := *v
		out.Field = prefix + "." + v.Field
		return &out
	}
	return err
}

// CheckText refuses text a person reads that is not UTF-8 or carries
// control characters other than tab and newline: they hide or rewrite
// what a terminal or page shows, and a NUL cuts the text short in many
// tools.
func CheckText(field, s string) error {
	if !utf8.ValidString(s) {
		return Invalid(field, "must be valid UTF-8")
	}
	for i, r := range s {
		if r != '\t' && r != '\n' && unicode.IsControl(r) {
			return Invalid(field, "holds the control character %U at byte %d (only tab and newline are allowed)", r, i)
		}
	}
	return nil
}
