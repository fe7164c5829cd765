package config

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// TestReferenceMatchesConfig keeps docs/config.md true: every key of the
// Config struct is documented under its section, and every documented key
// exists.
func TestReferenceMatchesConfig(t *testing.T) {
	t.Parallel()
	var want []string
	var walk func(reflect.Type, string)
	walk = func(typ reflect.Type, prefix string) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			path := prefix + name
			ft := f.Type
			switch {
			case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
				walk(ft.Elem(), path+".<>.")
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
				walk(ft.Elem(), path+"[].")
			case ft.Kind() == reflect.Struct && ft != reflect.TypeFor[Duration]():
				walk(ft, path+".")
			default:
				want = append(want, path)
			}
		}
	}
	walk(reflect.TypeFor[Config](), "")

	got := documentedKeys(t)
	slices.Sort(want)
	slices.Sort(got)
	require.Equal(t, want, got, "docs/config.md and the Config struct differ")
}

// documentedKeys returns the keys docs/config.md's tables document: a
// table row's first cell, qualified by the section heading it is under
// ("## `agents.<name>`" → "agents.<>.", "## `webhooks[]`" → "webhooks[].").
func documentedKeys(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/config.md")
	require.NoError(t, err)
	var got []string
	section := ""
	heading := regexp.MustCompile("^## `([^`]+)`")
	row := regexp.MustCompile("^\\| `([^`]+)` \\|")
	for line := range strings.SplitSeq(string(doc), "\n") {
		if m := heading.FindStringSubmatch(line); m != nil {
			section = regexp.MustCompile(`<[^>]*>`).ReplaceAllString(m[1], "<>") + "."
			continue
		}
		if strings.HasPrefix(line, "## ") {
			section = ""
			continue
		}
		if m := row.FindStringSubmatch(line); m != nil {
			got = append(got, section+m[1])
		}
	}
	require.NotEmpty(t, got)
	return got
}

// TestReferenceKeysDecode: every key docs/config.md documents is one the
// strict decoder takes, written as the page says (a map's entries under a
// name, a list's under an element), and a key it does not document is
// refused.
func TestReferenceKeysDecode(t *testing.T) {
	t.Parallel()
	// file writes a config setting path (like "agents.<>.kind") to null,
	// which keeps the default: only the key is checked.
	file := func(path string) []byte {
		var leaf any
		parts := strings.Split(path, ".")
		for i := len(parts) - 1; i >= 0; i-- {
			switch name, list := strings.CutSuffix(parts[i], "[]"); {
			case parts[i] == "<>":
				leaf = map[string]any{"x": leaf}
			case list:
				leaf = map[string]any{name: []any{leaf}}
			default:
				leaf = map[string]any{name: leaf}
			}
		}
		out, err := yaml.Marshal(leaf)
		require.NoError(t, err)
		return out
	}
	unknown := func(path string) []string {
		_, err := Parse(file(path))
		var keys []string
		for _, fe := range FieldErrors(err) {
			if strings.HasPrefix(fe.Message, "unknown key") {
				keys = append(keys, fe.Path)
			}
		}
		return keys
	}
	for _, path := range documentedKeys(t) {
		require.Empty(t, unknown(path), "docs/config.md documents %s, which errand.yaml refuses:\n%s", path, file(path))
	}
	for path, want := range map[string]string{
		"lisen":                   "lisen",
		"agents.<>.modle":         "agents.x.modle",
		"budget.task.max_tokenz":  "budget.task.max_tokenz",
		"webhooks[].urls":         "webhooks[0].urls",
		"schedules.<>.catchup":    "schedules.x.catchup",
		"memory_limits.user.max":  "memory_limits.user.max",
		"a2a.base":                "a2a.base",
		"auth.token":              "auth.token",
		"mcp_servers.<>.commands": "mcp_servers.x.commands",
	} {
		require.Equal(t, []string{want}, unknown(path), "an undocumented key is refused")
	}
}
