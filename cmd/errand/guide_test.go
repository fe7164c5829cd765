package main

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// An error is printed with one "errand:" prefix, however many the layers
// below added.
func TestOneErrandPrefix(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"submit: errand: invalid agent: x":                    "submit: invalid agent: x",
		"errand: errand: task not found":                      "task not found",
		"export: errand: export task: errand: gone":           "export: export task: gone",
		"cannot reach the daemon: is `errand serve` running?": "cannot reach the daemon: is `errand serve` running?",
	} {
		require.Equal(t, want, oneErrandPrefix(in), in)
	}
	r := cli(t, testEnv(nil), "tasks", "sho")
	require.Error(t, r.err)
	require.Equal(t, "errand: unknown command \"sho\" for \"errand tasks\"; did you mean show?\nRun 'errand tasks --help' for its commands.\n", r.stderr)

	var a app
	require.Equal(t, "submit: invalid agent", a.describe(errors.New("errand: submit: errand: invalid agent")))
}

// Every command with subcommands suggests close ones, not only the root.
func TestSubcommandSuggestions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tasks", "shwo"}, "did you mean show?"},
		{[]string{"schedule", "lst"}, "did you mean list?"},
		{[]string{"memory", "serch"}, "did you mean search?"},
		{[]string{"budget", "resme"}, "did you mean resume?"},
		{[]string{"taks"}, "did you mean tasks?"},
	} {
		r := cli(t, testEnv(nil), tc.args...)
		require.Error(t, r.err, tc.args)
		require.Contains(t, r.stderr, tc.want, tc.args)
	}
}
