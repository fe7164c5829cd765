package agent

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestModelToolName(t *testing.T) {
	t.Parallel()
	hashed := func(t *testing.T, name, prefix string) {
		t.Helper()
		got := modelToolName(name)
		require.Regexp(t, `^`+prefix+`_[0-9a-f]{8}$`, got, name)
	}
	for _, tt := range []struct{ name, want string }{
		{"finish_task", "finish_task"},
		{"web-search", "web-search"},
		{"files.read_file", "files__read_file"},
		{"everything.get-sum", "everything__get-sum"},
		{"a.b__c", "a__b__c"},
		{"a._b", "a___b"},
	} {
		require.Equal(t, tt.want, modelToolName(tt.name), tt.name)
	}
	t.Run("hashed", func(t *testing.T) {
		hashed(t, "files.read.all", "files__read_all") // a dot in the tool name
		hashed(t, "a__b.c", "a__b__c")                 // would read back as a.b__c
		hashed(t, "a_.b", "a___b")                     // would read back as a._b
		hashed(t, "files.lire le fichier", "files__lire_le_fichier")
		hashed(t, "files.résumé", "files__r_sum_")
		hashed(t, "search."+strings.Repeat("x", 80), "search__"+strings.Repeat("x", 47))
		hashed(t, strings.Repeat("y", 65), strings.Repeat("y", 55))
		hashed(t, "", "")
	})

	// Names that are alike stay apart.
	seen := map[string]string{}
	for _, name := range []string{
		"a.b", "a.b_c", "a_b.c", "a.b.c", "a__b.c", "a.b__c", "a_.b", "a._b", "a.-b", "a-.b",
		"a." + strings.Repeat("x", 60), "a." + strings.Repeat("x", 61), "a." + strings.Repeat("x", 59) + "y",
		"a.ü", "a.ö", "a. ", "a.\t",
	} {
		model := modelToolName(name)
		require.Regexp(t, `^[a-zA-Z0-9_-]{1,64}$`, model, name)
		require.NotContains(t, seen, model, "%q and %q", name, seen[model])
		seen[model] = name
		require.Equal(t, model, modelToolName(name), "the same every time")
	}
}

func TestToolNamesMapBack(t *testing.T) {
	t.Parallel()
	names := toolNames{}
	for _, name := range []string{"finish_task", "files.read", "files.read.all"} {
		_, ok := names.add(name)
		require.True(t, ok)
	}
	_, ok := names.add("files.read")
	require.True(t, ok, "the same tool twice is fine")
	model, ok := names.add("files__read")
	require.False(t, ok, "a tool whose model name is taken is not offered")
	require.Equal(t, "files__read", model)

	require.Equal(t, "finish_task", names.name("finish_task"))
	require.Equal(t, "files.read", names.name("files__read"))
	require.Equal(t, "files.read.all", names.name(modelToolName("files.read.all")))
	require.Equal(t, "web.fetch", names.name("web__fetch"), "a server's tool not offered keeps its name")
	require.Equal(t, "a._b", names.name("a___b"))
	require.Equal(t, "__x", names.name("__x"), "unless the name does not read back")
	require.Equal(t, "nope", names.name("nope"), "an unknown name stays as called")
}

// FuzzModelToolName: every name maps to one models accept, the same each
// time; names models accept stay; two MCP names never share one.
func FuzzModelToolName(f *testing.F) {
	for _, seed := range [][2]string{
		{"files.read", "files_read"}, {"a__b.c", "a.b__c"}, {"a_.b", "a._b"}, {"x.é", "x.è"},
		{"s." + strings.Repeat("t", 70), "s." + strings.Repeat("t", 71)}, {"", "."},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ma, mb := modelToolName(a), modelToolName(b)
		require.Regexp(t, `^[a-zA-Z0-9_-]{1,64}$`, ma)
		require.Equal(t, ma, modelToolName(a))
		if modelNameRE.MatchString(a) {
			require.Equal(t, a, ma)
		}
		if a != b && strings.Contains(a, ".") && strings.Contains(b, ".") {
			require.NotEqual(t, ma, mb, "%q and %q", a, b)
		}
	})
}
