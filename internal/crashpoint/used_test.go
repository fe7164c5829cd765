package crashpoint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryPointIsPlaced checks that each point in All is hit somewhere in
// errand's code, and nothing hits a point that is not declared: a point
// the soak walks but no write reaches would pass without ever crashing.
func TestEveryPointIsPlaced(t *testing.T) {
	// The constants' names, from this package's source.
	file, err := parser.ParseFile(token.NewFileSet(), "crashpoint.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	for _, d := range file.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "Name" {
				for _, n := range vs.Names {
					declared[n.Name] = true
				}
			}
		}
	}
	if len(declared) != len(All) {
		t.Fatalf("%d Name constants, %d in All", len(declared), len(All))
	}

	hit := regexp.MustCompile(`crashpoint\.Hit\(crashpoint\.([A-Za-z0-9_]+)\)`)
	placed := map[string][]string{}
	root := filepath.Join("..", "..")
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata", "crashpoint":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range hit.FindAllSubmatch(b, -1) {
			placed[string(m[1])] = append(placed[string(m[1])], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range declared {
		if len(placed[name]) == 0 {
			t.Errorf("crash point %s is declared but no code hits it", name)
		}
	}
	for name, paths := range placed {
		if !declared[name] {
			t.Errorf("%v hit crashpoint.%s, which is not a declared point", paths, name)
		}
	}
}
