package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/errandhq/errand/internal/config"
	"github.com/errandhq/errand/internal/daemon"
)

func (a *app) newGCCmd() *cobra.Command {
	var (
		sf        storeFlags
		dryRun    bool
		olderThan time.Duration
	)
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove finished tasks older than the retention",
		Long: `gc removes, as the daemon does every minute, the tasks that finished longer
ago than retention (errand.yaml; default 720h) or --older-than, with their
steps, events, questions, inbox entries and artifacts. A task an open task
still refers to (its parent, a child, a dependent, a chained follow-up)
stays. It reads the store directly; --dry-run lists what would go.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := config.LoadEnv(sf.configFile, a.lookup)
			if err != nil {
				return err
			}
			keep := time.Duration(cfg.Retention)
			if cmd.Flags().Changed("older-than") {
				if olderThan < 0 {
					return fmt.Errorf("--older-than %s: must not be negative", olderThan)
				}
				keep = olderThan
			}
			if keep == 0 {
				fmt.Fprintln(a.stdout, "retention is 0: every task is kept")
				return nil
			}
			c, err := a.openStore(cmd.Context(), &sf, true)
			if err != nil {
				return err
			}
			defer c.Close()
			before := a.now().Add(-keep)
			res, err := c.Purge(cmd.Context(), before, dryRun)
			if err != nil {
				return err
			}
			if !dryRun {
				home, err := a.home()
				if err != nil {
					return err
				}
				if err := daemon.RemoveArtifacts(home, res.TaskIDs); err != nil {
					return err
				}
			}
			if a.asJSON {
				return printJSON(a.stdout, map[string]any{"dry_run": dryRun, "finished_before": before.UTC(), "tasks": res.TaskIDs, "rows": res.Rows})
			}
			verb := "removed"
			if dryRun {
				verb = "would remove"
			}
			fmt.Fprintf(a.stdout, "%s %d tasks that finished before %s\n", verb, len(res.TaskIDs), before.UTC().Format(time.RFC3339))
			if dryRun {
				for _, id := range res.TaskIDs {
					fmt.Fprintln(a.stdout, id)
				}
			}
			return nil
		},
	}
	sf.register(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be removed; remove nothing")
	cmd.Flags().DurationVar(&olderThan, "older-than", 0, "remove tasks finished longer ago than this (default: the config's retention)")
	return cmd
}
