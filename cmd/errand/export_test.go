package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
)

// seedStore creates $home/errand.db with two tasks.
func seedStore(t *testing.T, home string) {
	t.Helper()
	c, err := errand.Open(t.Context(), "sqlite://"+filepath.Join(home, "errand.db"), nil)
	require.NoError(t, err)
	defer c.Close()
	for _, goal := range []string{"first", "second"} {
		_, err := c.Submit(t.Context(), &errand.SubmitParams{Goal: goal})
		require.NoError(t, err)
	}
}

// kinds counts the lines of an export by kind.
func kinds(t *testing.T, export string) map[string]int {
	t.Helper()
	out := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(export))
	for sc.Scan() {
		var line struct {
			Kind string          `json:"kind"`
			Data json.RawMessage `json:"data"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line), sc.Text())
		out[line.Kind]++
	}
	return out
}

func TestExportImport(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	seedStore(t, home)
	e := testEnv(map[string]string{"ERRAND_HOME": home})
	// The CLI's now is in 2025; the tasks were written just now.
	e.now = time.Now

	r := cli(t, e, "export")
	require.NoError(t, r.err, r.stderr)
	got := kinds(t, r.stdout)
	require.Equal(t, 2, got["task"])
	require.Positive(t, got["event"])
	export := r.stdout

	// --since in the future keeps nothing; a duration reaches back.
	r = cli(t, e, "export", "--since", time.Now().Add(time.Hour).Format(time.RFC3339))
	require.NoError(t, r.err, r.stderr)
	require.Zero(t, kinds(t, r.stdout)["task"])
	r = cli(t, e, "export", "--since", "24h")
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, 2, kinds(t, r.stdout)["task"])

	// -o writes a file.
	file := filepath.Join(t.TempDir(), "backup.jsonl")
	r = cli(t, e, "export", "-o", file)
	require.NoError(t, r.err, r.stderr)
	require.Empty(t, r.stdout)
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, 2, kinds(t, string(data))["task"])

	// Import into a new home, from a file and from stdin.
	newHome := filepath.Join(t.TempDir(), "new")
	r = cli(t, testEnv(map[string]string{"ERRAND_HOME": newHome}), "import", file)
	require.NoError(t, r.err, r.stderr)
	require.True(t, strings.HasPrefix(r.stdout, "imported 2 tasks, "), r.stdout)

	stdinHome := t.TempDir()
	se := testEnv(map[string]string{"ERRAND_HOME": stdinHome})
	se.stdin = strings.NewReader(export)
	r = cli(t, se, "--json", "import", "-")
	require.NoError(t, r.err, r.stderr)
	var stats errand.ImportStats
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &stats))
	require.Equal(t, 2, stats.Tasks)

	// The imported store exports the same tasks.
	r = cli(t, testEnv(map[string]string{"ERRAND_HOME": newHome}), "export")
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, 2, kinds(t, r.stdout)["task"])

	// A store that is not empty is refused.
	r = cli(t, testEnv(map[string]string{"ERRAND_HOME": newHome}), "import", file)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "not empty")
}

func TestExportErrors(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	r := cli(t, testEnv(map[string]string{"ERRAND_HOME": home}), "export")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "errand: no store at "+filepath.Join(home, "errand.db"))
	_, err := os.Stat(filepath.Join(home, "errand.db"))
	require.True(t, os.IsNotExist(err), "export creates no store")

	r = cli(t, testEnv(map[string]string{"ERRAND_HOME": home}), "export", "--since", "yesterday")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, `--since: "yesterday" is not`)
	for _, since := range []string{"9999-12-31T23:59:59-23:59", "0000-01-01T00:00:00+23:59", "3000000d"} {
		r = cli(t, testEnv(map[string]string{"ERRAND_HOME": home}), "export", "--since", since)
		require.Equal(t, 1, r.code, since)
		require.Contains(t, r.stderr, `--since: "`+since+`" is outside the years 0001–9999 (UTC)`)
	}

	r = cli(t, testEnv(map[string]string{"ERRAND_HOME": home}), "import", filepath.Join(home, "missing.jsonl"))
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "no such file")

	// --store names another store.
	other := t.TempDir()
	seedStore(t, other)
	r = cli(t, testEnv(map[string]string{"ERRAND_HOME": home}), "export", "--store", filepath.Join(other, "errand.db"))
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, 2, kinds(t, r.stdout)["task"])
}
