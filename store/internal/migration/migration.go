// Package migration reads a store driver's numbered schema changes:
// NNN_name.up.sql and NNN_name.down.sql files, embedded in the driver.
package migration

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one numbered schema change.
type Migration struct {
	Version int
	Name    string
	Up      string
	Down    string
}

// Load reads the migrations in dir of fsys, in version order. Versions
// must run 1, 2, 3… without gaps, each with both files.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	byVersion := map[int]*Migration{}
	for _, e := range entries {
		name := e.Name()
		base, kind, ok := strings.Cut(strings.TrimSuffix(name, ".sql"), ".")
		num, rest, ok2 := strings.Cut(base, "_")
		version, err := strconv.Atoi(num)
		if !ok || !ok2 || err != nil || (kind != "up" && kind != "down") {
			return nil, fmt.Errorf("migration file %s: want NNN_name.up.sql or NNN_name.down.sql", name)
		}
		body, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, err
		}
		m := byVersion[version]
		if m == nil {
			m = &Migration{Version: version, Name: rest}
			byVersion[version] = m
		}
		if kind == "up" {
			m.Up = string(body)
		} else {
			m.Down = string(body)
		}
	}
	out := make([]Migration, 0, len(byVersion))
	for _, m := range byVersion {
		if m.Up == "" || m.Down == "" {
			return nil, fmt.Errorf("migration %03d_%s: both up and down files are required", m.Version, m.Name)
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %03d_%s: versions must run 1, 2, 3… without gaps", m.Version, m.Name)
		}
	}
	return out, nil
}
