package config

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// A YAML syntax error names the line and column of the problem, not of the
// construct holding it, and quotes the line.
func TestSyntaxErrorLocation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		yaml    string
		line    int
		column  int
		text    string
		message string
	}{
		{
			name:    "BadIndentLine4",
			yaml:    "# errand\nlisten: 127.0.0.1:7780\nworkers: 4\n  store: sqlite\nlanes: session\n",
			line:    4,
			column:  8, // the colon: "workers: 4 store" would be one value
			text:    "  store: sqlite",
			message: "mapping values are not allowed in this context",
		},
		{
			name:    "NestedBadIndent",
			yaml:    "listen: 127.0.0.1:7780\nagents:\n  shell:\n    kind: exec\n   command: [./agent]\n",
			line:    5,
			column:  4,
			text:    "   command: [./agent]",
			message: "did not find expected key",
		},
		{
			name:    "Tab",
			yaml:    "listen: 127.0.0.1:7780\nworkers: 4\nagents:\n\tshell: {kind: exec, command: [x]}\n",
			line:    4,
			column:  1,
			text:    "\tshell: {kind: exec, command: [x]}",
			message: "found character that cannot start any token",
		},
		{
			name:    "UnclosedQuote",
			yaml:    "listen: 127.0.0.1:7780\nworkers: 4\nstore: \"/var/lib/errand.db\nlanes: session\n",
			line:    3,
			column:  8,
			text:    "store: \"/var/lib/errand.db",
			message: "found unexpected end of stream",
		},
		{
			name:    "UnclosedFlowList",
			yaml:    "workers: [1\n",
			line:    1,
			column:  11,
			text:    "workers: [1",
			message: "did not find expected ',' or ']'",
		},
		{
			name:    "SecondDocument",
			yaml:    "workers: 1\n---\nlisten: a\n  lanes: b\n",
			line:    4,
			column:  8,
			text:    "  lanes: b",
			message: "mapping values are not allowed in this context",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse([]byte(tt.yaml))
			require.Nil(t, cfg)
			var se *SyntaxError
			require.ErrorAs(t, err, &se)
			require.Equal(t, &SyntaxError{Line: tt.line, Column: tt.column, Text: tt.text, Message: tt.message}, se)
			require.Contains(t, err.Error(), "line "+strconv.Itoa(tt.line)+", column "+strconv.Itoa(tt.column)+": "+tt.message)
			require.Contains(t, err.Error(), strconv.Itoa(tt.line)+" | "+tt.text, "the line is quoted")
		})
	}

	t.Run("Caret", func(t *testing.T) {
		t.Parallel()
		_, err := Parse([]byte("workers: 4\n\tlanes: x\n"))
		require.EqualError(t, err, "YAML syntax error at line 2, column 1: found a tab character that violates indentation\n"+
			"  2 | \tlanes: x\n"+
			"    | ^")
		_, err = Parse([]byte("# c\nlisten: a\nworkers: 4\n  store: x\n"))
		require.EqualError(t, err, "YAML syntax error at line 4, column 8: mapping values are not allowed in this context\n"+
			"  4 |   store: x\n"+
			"    |        ^")
	})

	// An unknown key is not a syntax error: it is a FieldError with its
	// path and line, and the rest is still checked.
	t.Run("UnknownKeyLine7", func(t *testing.T) {
		t.Parallel()
		_, err := Parse([]byte("listen: 127.0.0.1:7780\nworkers: 4\nagents:\n  shell:\n    kind: exec\n    command: [./agent]\n    comand: [./other]\n"))
		fes := FieldErrors(err)
		require.Len(t, fes, 1)
		require.Equal(t, &FieldError{Path: "agents.shell.comand", Line: 7, Message: "unknown key (did you mean command?)"}, fes[0])
		var se *SyntaxError
		require.False(t, errors.As(err, &se))
	})

	t.Run("LoadFileKeepsThePosition", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), FileName)
		require.NoError(t, os.WriteFile(path, []byte("listen: a\nagents:\n  shell:\n kind: exec\n"), 0o600))
		_, err := LoadFile(path, true)
		var se *SyntaxError
		require.ErrorAs(t, err, &se)
		require.Equal(t, 4, se.Line)
		require.Contains(t, err.Error(), "load config "+path+": YAML syntax error at line 4")
	})
}
