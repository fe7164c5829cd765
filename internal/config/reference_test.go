package config

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReferenceMatchesConfig keeps docs/config.md true: every key of the
// Config struct is documented under its section, and every documented key
// exists.
func TestReferenceMatchesConfig(t *testing.T) {
	doc, err := os.ReadFile("../../docs/config.md")
	require.NoError(t, err)

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

	// Documented keys: a table row's first cell, qualified by the section
	// heading it is under ("## `agents.<name>`" → "agents.<>.").
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
	slices.Sort(want)
	slices.Sort(got)
	require.Equal(t, want, got, "docs/config.md and the Config struct differ")
}
