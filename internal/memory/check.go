package memory

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/errandhq/errand/internal/id"
	"github.com/errandhq/errand/internal/validation"
	"github.com/errandhq/errand/store"
)

// Check validates a memory's text and tags and returns the tags without
// duplicates; a bad one is a *validation.Error.
func Check(text string, tags []string) ([]string, error) {
	switch {
	case strings.TrimSpace(text) == "":
		return nil, validation.Invalid("text", "must not be empty")
	case len(text) > MaxTextBytes:
		return nil, validation.Invalid("text", "is %d bytes; the limit is %d", len(text), MaxTextBytes)
	case !utf8.ValidString(text):
		return nil, validation.Invalid("text", "must be valid UTF-8")
	case strings.ContainsRune(text, 0):
		return nil, validation.Invalid("text", "holds a NUL character")
	}
	if len(tags) > MaxTags {
		return nil, validation.Invalid("tags", "has %d tags; the limit is %d", len(tags), MaxTags)
	}
	out := make([]string, 0, len(tags))
	for _, tag := range tags {
		if err := CheckTag(tag); err != nil {
			return nil, err
		}
		if !slices.Contains(out, tag) {
			out = append(out, tag)
		}
	}
	return out, nil
}

// CheckTag validates one tag of a memory.
func CheckTag(tag string) error {
	switch {
	case strings.TrimSpace(tag) == "":
		return validation.Invalid("tags", "each tag must not be blank")
	case !utf8.ValidString(tag):
		return validation.Invalid("tags", "each tag must be valid UTF-8")
	case utf8.RuneCountInString(tag) > MaxTagRunes:
		return validation.Invalid("tags", "tag %q is longer than %d characters", tag, MaxTagRunes)
	}
	for _, r := range tag {
		if unicode.IsControl(r) {
			return validation.Invalid("tags", "tag %q holds the control character %U", tag, r)
		}
	}
	return nil
}

// CheckQuery validates a search or recall query.
func CheckQuery(field, q string) error {
	switch {
	case strings.TrimSpace(q) == "":
		return validation.Invalid(field, "must not be empty")
	case len(q) > MaxQueryBytes:
		return validation.Invalid(field, "is %d bytes; the limit is %d", len(q), MaxQueryBytes)
	case !utf8.ValidString(q):
		return validation.Invalid(field, "must be valid UTF-8")
	}
	return nil
}

// CheckProvenance validates the provenance filters of a list or purge.
func CheckProvenance(taskID, agent, source string) error {
	if taskID != "" && !id.Valid(id.Task, taskID) {
		return validation.Invalid("task_id", "%q is not a task id", taskID)
	}
	if len(agent) > 100 {
		return validation.Invalid("agent", "is %d bytes; the limit is 100", len(agent))
	}
	if err := validation.CheckText("agent", agent); err != nil {
		return err
	}
	if source != "" && !store.ValidMemorySource(source) {
		return validation.Invalid("source", "%q is not one of %s", source, strings.Join(store.MemorySources, ", "))
	}
	return nil
}

// CheckCategory validates a memory category: lower-case letters, digits
// and '_', starting with a letter, at most 64.
func CheckCategory(c string) error {
	if c == "" {
		return nil
	}
	if len(c) > 64 || c[0] < 'a' || c[0] > 'z' || strings.ContainsFunc(c, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_')
	}) {
		return validation.Invalid("category", "%q is not a category name: use lower-case letters, digits and '_', starting with a letter (at most 64)", c)
	}
	return nil
}

// CheckSubject validates a memory subject.
func CheckSubject(s string) error {
	if len(s) > MaxSubjectBytes {
		return validation.Invalid("subject", "is %d bytes; the limit is %d", len(s), MaxSubjectBytes)
	}
	if err := validation.CheckText("subject", s); err != nil {
		return err
	}
	if strings.ContainsFunc(s, unicode.IsControl) {
		return validation.Invalid("subject", "must not hold control characters")
	}
	return nil
}
