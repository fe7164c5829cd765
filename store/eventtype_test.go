package store

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIsOwnEventType(t *testing.T) {
	t.Parallel()

	for _, c := range []struct {
		typ string
		own bool
	}{
		{EventTaskCompleted, true},
		{"Task.completed", true},
		{"TASK.COMPLETED", true},
		{"task.deferred", true}, // a type added later in errand's namespace
		{"task.anything_new", true},
		{EventMemoryCreated, true},
		{"Memory.Created", true},
		{EventMemoryPurged, true},
		{EventPushConfigSet, true},
		{"A2A.push_config_set", true},
		{EventScheduleFired, true},
		{"schedule.skipped", true},
		{EventHeartbeatDecision, true},
		{EventBudgetAlert, true},
		{EventAlert, true},
		{"ALERT", true},
		{"tas\u212A.completed", true}, // the Kelvin sign folds to k
		{"\u017Fchedule.fired", true}, // and the long s to s
		{"deploy.finished", false},
		{"ping", false},
		{"alerts", false},
		{"alert.raised", false},
		{"tasks.done", false},
		{"mytask.completed", false},
		{"task", false},
		{"memory", false},
		{"", false},
		{"webhook.received", false},
	} {
		require.Equal(t, c.own, IsOwnEventType(c.typ), "%q", c.typ)
	}
}

// TestEveryDeclaredEventTypeIsOwn keeps the list from drifting: every
// event type constant declared anywhere in the module (a constant named
// Event… whose value is a string) is refused, in any case. A new type in
// errand's namespaces is covered at once; a type in a new namespace fails
// here until OwnEventNamespaces or the list of own types has it.
func TestEveryDeclaredEventTypeIsOwn(t *testing.T) {
	t.Parallel()

	found := declaredEventTypes(t, "..")
	require.Contains(t, found, "EventTaskCompleted", "the scan finds store's own constants")
	require.Contains(t, found, "EventMemoryCreated")
	require.Contains(t, found, "EventPushConfigSet")
	require.Contains(t, found, "EventAlert")
	for name, typ := range found {
		require.True(t, IsOwnEventType(typ), "%s = %q is an event type errand writes: IsOwnEventType must refuse it", name, typ)
		require.True(t, IsOwnEventType(strings.ToUpper(typ)), "%s in upper case", name)
	}
	// Each explicit entry is one errand declares: the list holds no
	// leftovers of renamed types.
	values := map[string]bool{}
	for _, typ := range found {
		values[typ] = true
	}
	for _, typ := range ownEventTypes {
		require.True(t, values[typ], "own event type %q is declared nowhere", typ)
	}
}

// eventConstName is the name of an event type constant.
var eventConstName = regexp.MustCompile(`^Event[A-Z][A-Za-z0-9]*$`)

// declaredEventTypes parses every non-test Go file under root and returns
// the string constants named Event…, by name.
func declaredEventTypes(t *testing.T, root string) map[string]string {
	t.Helper()
	found := map[string]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch name := d.Name(); {
			case path == root:
			case strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "interop":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !eventConstName.MatchString(name.Name) || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					found[name.Name] = v
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	return found
}

func FuzzIsOwnEventType(f *testing.F) {
	for _, s := range []string{"task.completed", "Task.Completed", "memory.created", "alert", "deploy.finished", "a2a.x", "ſchedule.fired", "TASK.", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, typ string) {
		own := IsOwnEventType(typ)
		// Case never matters: folding every letter gives the same answer.
		require.Equal(t, own, IsOwnEventType(strings.ToUpper(typ)), "%q", typ)
		require.Equal(t, own, IsOwnEventType(strings.ToLower(typ)), "%q", typ)
		// Everything in errand's namespaces is errand's.
		for _, ns := range OwnEventNamespaces() {
			if len(typ) >= len(ns) && strings.EqualFold(typ[:len(ns)], ns) {
				require.True(t, own, "%q is in %s", typ, ns)
			}
		}
		if strings.EqualFold(typ, EventAlert) {
			require.True(t, own, "%q", typ)
		}
	})
}
