package main

import "github.com/spf13/cobra"

func (a *app) newTasksForkCmd() *cobra.Command {
	return &cobra.Command{Use: "fork ID", Short: "Rerun a task from one of its steps", Hidden: true}
}
