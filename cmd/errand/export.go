package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/config"
	"github.com/errandhq/errand/internal/daemon"
	"github.com/errandhq/errand/store"
)

// storeFlags are the flags of the commands that open the store directly.
type storeFlags struct {
	configFile         string
	store              string
	skipIntegrityCheck bool
}

func (f *storeFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.configFile, "config", "", "config file (default $ERRAND_HOME/errand.yaml)")
	cmd.Flags().StringVar(&f.store, "store", "", "store: sqlite, a SQLite path or a postgres:// URL (default from the config)")
	cmd.Flags().BoolVar(&f.skipIntegrityCheck, "skip-integrity-check", false, "open a SQLite store that fails its integrity check, to save what is readable")
}

// open opens the store the daemon uses (or --store), whether the daemon
// runs or not. With mustExist, a SQLite file that is not there is an error
// rather than a new empty store.
func (a *app) openStore(ctx context.Context, f *storeFlags, mustExist bool) (*errand.Client, error) {
	cfg, err := config.LoadEnv(f.configFile, a.lookup)
	if err != nil {
		return nil, err
	}
	if f.store != "" {
		cfg.Store = f.store
	}
	home, err := a.home()
	if err != nil {
		return nil, err
	}
	dsn := cfg.StoreDSN(home)
	if path, ok := config.SQLitePath(dsn); ok {
		switch _, err := os.Stat(path); {
		case errors.Is(err, fs.ErrNotExist) && mustExist:
			return nil, fmt.Errorf("no store at %s (set --store, or ERRAND_HOME)", path)
		case errors.Is(err, fs.ErrNotExist):
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return nil, fmt.Errorf("create the store's directory: %w", err)
			}
		}
	}
	c, err := errand.Open(ctx, dsn, &errand.Config{Durability: cfg.Durability, SkipIntegrityCheck: f.skipIntegrityCheck})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", daemon.ExplainStoreError(err))
	}
	return c, nil
}

func (a *app) newExportCmd() *cobra.Command {
	var (
		sf     storeFlags
		since  string
		output string
	)
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write the store's tasks, steps and events as JSON Lines",
		Long: `export reads the store directly (the daemon may run or not) and writes JSON
Lines, one {"kind": "task|dependency|step|input|event|notification", "data": {…}}
object a line: text-first, diffable, loadable with "errand import".

--since keeps the tasks updated since then (with all their rows) and the events
written since then: an RFC 3339 time, a date (2006-01-02, local time), or a
duration such as 24h meaning that long ago.`,
		Example: `  errand export > backup.jsonl
  errand export --since 24h -o today.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var from time.Time
			if since != "" {
				t, err := parseSince(since, a.now())
				if err != nil {
					return fmt.Errorf("--since: %w", err)
				}
				from = t
			}
			ctx := cmd.Context()
			c, err := a.openStore(ctx, &sf, true)
			if err != nil {
				return err
			}
			defer c.Close()
			w := a.stdout
			var f *os.File
			if output != "" && output != "-" {
				f, err = os.Create(output)
				if err != nil {
					return fmt.Errorf("export: %w", err)
				}
				defer f.Close()
				w = f
			}
			bw := bufio.NewWriterSize(w, 64<<10)
			if err := c.Export(ctx, bw, from); err != nil {
				return fmt.Errorf("export: %w", err)
			}
			if err := bw.Flush(); err != nil {
				return fmt.Errorf("export: %w", err)
			}
			if f != nil {
				if err := f.Close(); err != nil {
					return fmt.Errorf("export: %w", err)
				}
			}
			return nil
		},
	}
	sf.register(cmd)
	cmd.Flags().StringVar(&since, "since", "", "only what changed since: an RFC 3339 time, a date, or a duration like 24h")
	cmd.Flags().StringVarP(&output, "output", "o", "", "write to this file instead of stdout")
	return cmd
}

// parseSince reads --since: RFC 3339, a date, or a duration before now,
// landing within the years 0001–9999 in UTC.
func parseSince(s string, now time.Time) (time.Time, error) {
	t, err := parseSinceForm(s, now)
	if err != nil {
		return time.Time{}, err
	}
	if !store.TimeInRange(t.UTC()) {
		return time.Time{}, fmt.Errorf("%q is outside the years 0001–9999 (UTC)", s)
	}
	return t, nil
}

func parseSinceForm(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation("2006-01-02", s, time.Local); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if days, err := strconv.Atoi(n); err == nil && days >= 0 && days <= 4_000_000 {
			return now.AddDate(0, 0, -days), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time (2006-01-02T15:04:05Z), a date (2006-01-02) or a duration (24h, 7d)", s)
}

func (a *app) newImportCmd() *cobra.Command {
	var sf storeFlags
	cmd := &cobra.Command{
		Use:   "import [FILE|-]",
		Short: "Load an export into an empty store",
		Long: `import reads an export (see "errand export") from FILE, or stdin when FILE is
"-" or absent, and loads it into the store, ids, statuses and times preserved.
The store must be empty: import into a new ERRAND_HOME or --store. Stop the
daemon first, or point it at the new store afterwards.`,
		Example: `  ERRAND_HOME=/srv/errand-new errand import backup.jsonl`,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r io.Reader = cmd.InOrStdin()
			name := "stdin"
			if len(args) == 1 && args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return fmt.Errorf("import: %w", err)
				}
				defer f.Close()
				r, name = f, args[0]
			}
			ctx := cmd.Context()
			c, err := a.openStore(ctx, &sf, false)
			if err != nil {
				return err
			}
			defer c.Close()
			stats, err := c.Import(ctx, bufio.NewReaderSize(r, 64<<10))
			if err != nil {
				return fmt.Errorf("import %s: %w", name, err)
			}
			if a.asJSON {
				return printJSON(a.stdout, stats)
			}
			_, err = fmt.Fprintf(a.stdout, "imported %d tasks, %d dependencies, %d steps, %d inputs, %d events, %d notifications, %d schedules, %d memories\n",
				stats.Tasks, stats.Dependencies, stats.Steps, stats.Inputs, stats.Events, stats.Notifications, stats.Schedules, stats.Memories)
			return err
		},
	}
	sf.register(cmd)
	return cmd
}
