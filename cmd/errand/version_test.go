package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand/internal/version"
)

// errand version, --version and -v print the version internal/version
// computes; --json adds the commit, Go version and build time.
func TestVersionCommand(t *testing.T) {
	t.Parallel()
	info := version.Get()
	r := cli(t, liveEnv(), "version")
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, "errand  "+info.Version+"\n")
	require.Contains(t, r.stdout, "go      "+info.GoVersion+"\n")
	require.Regexp(t, `(?m)^commit  \S+`, r.stdout)

	r = cli(t, liveEnv(), "version", "--json")
	require.NoError(t, r.err, r.stderr)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	for _, key := range []string{"version", "commit", "go_version", "build_time"} {
		require.Contains(t, got, key)
	}
	require.Equal(t, info.Version, got["version"])
	require.Equal(t, info.GoVersion, got["go_version"])

	text := cli(t, liveEnv(), "version").stdout
	for _, flag := range []string{"--version", "-v"} {
		r = cli(t, liveEnv(), flag)
		require.NoError(t, r.err, r.stderr)
		require.Equal(t, text, r.stdout, flag)
	}
	r = cli(t, liveEnv(), "--version", "--json")
	require.NoError(t, r.err, r.stderr)
	require.Contains(t, r.stdout, `"version": "`+info.Version+`"`)
}
