// Package arch holds the test that keeps the tree's arrows pointing the
// way docs/architecture.md draws them: a change that adds an import
// against them fails here, naming the import.
package arch

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/errandhq/errand"

// deps is every errand package pkg imports: directly, or also through
// others.
func deps(t *testing.T, pkg string, direct bool) []string {
	t.Helper()
	args := []string{"list", "-deps", "-f", "{{.ImportPath}}", module + "/" + pkg}
	if direct {
		args = []string{"list", "-f", `{{join .Imports "\n"}}`, module + "/" + pkg}
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	var own []string
	for _, p := range strings.Fields(string(out)) {
		if p == module || strings.HasPrefix(p, module+"/") {
			own = append(own, strings.TrimPrefix(strings.TrimPrefix(p, module), "/"))
		}
	}
	return own
}

// packages lists errand's packages matching pattern.
func packages(t *testing.T, pattern string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", module+"/"+pattern).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pattern, err)
	}
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		pkgs = append(pkgs, strings.TrimPrefix(p, module+"/"))
	}
	return pkgs
}

func under(pkg string, roots ...string) bool {
	return slices.ContainsFunc(roots, func(r string) bool { return pkg == r || strings.HasPrefix(pkg, r+"/") })
}

func TestArrows(t *testing.T) {
	drivers := []string{"store/sqlitestore", "store/pgstore"}
	// A leaf every layer may call: a normal build compiles it to nothing.
	const crashpoints = "internal/crashpoint"
	type rule struct {
		name   string
		pkgs   []string
		direct bool // only the packages' own imports count
		// forbidden reports whether a dependency breaks the rule.
		forbidden func(dep string) bool
	}
	rules := []rule{{
		name:      "the store contract imports nothing of errand but its own internals",
		pkgs:      []string{"store"},
		forbidden: func(d string) bool { return d != "store" && !under(d, "store/internal") && d != crashpoints },
	}, {
		name: "a driver imports only the store contract",
		pkgs: drivers,
		forbidden: func(d string) bool {
			return (!under(d, "store") && d != crashpoints) || under(d, "store/storetest") || slices.Contains(drivers, d)
		},
	}, {
		name: "the engine reaches a database only through store.Store, and knows no wire shapes",
		pkgs: append(packages(t, "internal/engine/..."),
			"internal/scheduler", "internal/memory", "internal/validation", "internal/tasktemplate"),
		forbidden: func(d string) bool {
			return under(d, drivers...) || under(d, "internal/api", "internal/server", "internal/agent")
		},
	}, {
		name:      "agents reach the engine only through taskrun, and never a store",
		pkgs:      []string{"internal/agent", "internal/provider", "internal/taskrun", "internal/a2a/remote", "internal/mcpclient"},
		forbidden: func(d string) bool { return under(d, "internal/engine", "store") },
	}, {
		name:      "faces use the public API, which wires the drivers",
		pkgs:      []string{"internal/daemon", "internal/server", "internal/mcpserver", "internal/a2a", "internal/dashboard", "internal/webhook", "cmd/errand"},
		direct:    true,
		forbidden: func(d string) bool { return under(d, drivers...) },
	}}
	for _, r := range rules {
		for _, pkg := range r.pkgs {
			for _, d := range deps(t, pkg, r.direct) {
				if d != pkg && r.forbidden(d) {
					t.Errorf("%s imports %s: %s", pkg, d, r.name)
				}
			}
		}
	}
}

// maxFileLines is where a source file stops being read in one sitting:
// past it, it holds more than one concern.
const maxFileLines = 600

func TestFileSizes(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if n := bytes.Count(b, []byte("\n")); n > maxFileLines {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s has %d lines, more than %d: split it by concern", rel, n, maxFileLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
