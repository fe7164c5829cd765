package main

import (
	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "errand",
		Short: "A durable task engine for AI agents",
		Long: `errand keeps tasks for AI agents in a database and runs them in the
background: checkpointed, retried, recovered after crashes, observable.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newBenchCmd())
	return root
}
