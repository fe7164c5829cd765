package main

import (
	"github.com/spf13/cobra"

	"github.com/errandhq/errand/internal/version"
)

func (a *app) newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print errand's version, commit, Go version and build time",
		Long: `version prints the version of this binary (the same string the daemon gives in
/api/status, /healthz, its A2A cards and MCP server info), the commit it was
built from, the Go version and the build time. --json prints {"version",
"commit", "modified", "go_version", "build_time"}.`,
		Example: "  errand version\n  errand version --json",
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, args []string) error { return a.printVersion() },
	}
}

// printVersion prints the version information, as JSON with --json.
func (a *app) printVersion() error {
	info := version.Get()
	if a.asJSON {
		return printJSON(a.stdout, info)
	}
	commit := info.Commit
	switch {
	case commit == "":
		commit = "unknown"
	case info.Modified:
		commit += " (modified)"
	}
	t := &table{}
	t.row("errand", info.Version)
	t.row("commit", commit)
	t.row("go", info.GoVersion)
	if info.BuildTime != "" {
		t.row("built", info.BuildTime)
	}
	return t.write(a.stdout)
}
