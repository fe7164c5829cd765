package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
)

// gc lists, then removes, the finished tasks past retention with their
// artifacts; open tasks stay.
func TestGC(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	ctx := t.Context()
	c, err := errand.Open(ctx, "sqlite://"+filepath.Join(home, "errand.db"), nil)
	require.NoError(t, err)
	done, err := c.Submit(ctx, &errand.SubmitParams{Goal: "done"})
	require.NoError(t, err)
	open, err := c.Submit(ctx, &errand.SubmitParams{Goal: "open"})
	require.NoError(t, err)
	_, err = c.Cancel(ctx, done.ID, "finished with")
	require.NoError(t, err)
	require.NoError(t, c.Close())
	artifact := filepath.Join(home, "artifacts", done.ID)
	require.NoError(t, os.MkdirAll(artifact, 0o700))

	e := testEnv(map[string]string{"ERRAND_HOME": home})
	e.now = func() time.Time { return time.Now().Add(31 * 24 * time.Hour) } // past the default 720h
	r := cli(t, e, "gc", "--dry-run")
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, "would remove 1 tasks")
	require.Contains(t, r.stdout, done.ID)
	require.DirExists(t, artifact)

	r = cli(t, e, "--json", "gc")
	require.NoError(t, r.err, r.stderr)
	var out struct {
		Tasks []string `json:"tasks"`
		Rows  int64    `json:"rows"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
	require.Equal(t, []string{done.ID}, out.Tasks)
	require.Positive(t, out.Rows)
	require.NoDirExists(t, artifact)

	c, err = errand.Open(ctx, "sqlite://"+filepath.Join(home, "errand.db"), nil)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Get(ctx, done.ID)
	require.ErrorIs(t, err, errand.ErrNotFound)
	_, err = c.Get(ctx, open.ID)
	require.NoError(t, err)

	r = cli(t, e, "gc", "--older-than", "-1h")
	require.Equal(t, 1, r.code)
}
