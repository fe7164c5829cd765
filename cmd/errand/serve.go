package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/errandhq/errand/internal/daemon"
)

func (a *app) newServeCmd() *cobra.Command {
	opts := daemon.Options{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon: workers, the HTTP API, the heartbeat",
		Long: `serve runs errand's daemon in the foreground until SIGINT or SIGTERM, then
shuts down gracefully (a second signal kills it at once).

It reads --config (default $ERRAND_HOME/errand.yaml; a missing default file
means the defaults), then ERRAND_* environment variables, then these flags.
On first start it creates $ERRAND_HOME with the API token the CLI reads.

Once serving it logs one line, msg="errand serving", with the address, the
dashboard's URL and where the token the dashboard asks for is kept:
token_file=PATH, or token_env=NAME when auth.token_env names a variable (never
the token itself). A port in use says whether another errand daemon holds it;
--listen picks another.

At start it checks the SQLite store: an empty, damaged (PRAGMA quick_check)
or read-only file stops serve with what to do about it.

SIGHUP re-reads the config and applies its schedules:, the spend limits of
budget:, concurrency: and rate_limits: (other keys need a restart).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			if f.Changed("workers") && opts.Workers < 1 {
				return fmt.Errorf("--workers %d: must be at least 1", opts.Workers)
			}
			switch opts.LogFormat {
			case "", "text", "json":
			default:
				return fmt.Errorf("--log-format %q: want text or json", opts.LogFormat)
			}
			opts.Stderr = a.stderr
			opts.Lookup = a.lookup
			// SIGHUP re-reads the config and applies what a reload may.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			opts.Reload = hup
			if err := daemon.Run(cmd.Context(), &opts); err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.ConfigFile, "config", "", "config file (default $ERRAND_HOME/errand.yaml)")
	f.StringVar(&opts.Listen, "listen", "", "HTTP address, host:port (default from the config: 127.0.0.1:7780)")
	f.StringVar(&opts.Store, "store", "", "store: sqlite, a SQLite path or a postgres:// URL (default from the config: sqlite)")
	f.IntVar(&opts.Workers, "workers", 0, "tasks run at once (default from the config: 4)")
	f.StringVar(&opts.LogFormat, "log-format", "text", "log format: text or json")
	f.BoolVar(&opts.SkipIntegrityCheck, "skip-integrity-check", false, "do not check the SQLite file at start (PRAGMA quick_check reads all of it)")
	return cmd
}
