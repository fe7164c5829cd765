package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/errandhq/errand/internal/mcpserver"
)

// mcpProbeTimeout bounds the start-up check that the daemon answers.
const mcpProbeTimeout = 5 * time.Second

func (a *app) newMCPCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve errand's tools to an MCP host over stdio, from the running daemon",
		Long: `mcp is a Model Context Protocol server on stdin and stdout, for MCP hosts
(Claude Desktop, IDEs, agent frameworks) that start servers as commands. Its
tools submit_task, get_task_status, list_tasks, cancel_task, answer_task,
wait_for_task and fork_task, and the resources errand://tasks/{id}/output, act on the
daemon that "errand serve" runs: start that first. mcp finds it as the other
commands do (--server, --token, ERRAND_SERVER, ERRAND_TOKEN, $ERRAND_HOME).

Logs go to stderr; stdout carries the protocol only. The daemon serves the
same tools itself over Streamable HTTP at /mcp, behind its token.

A host's configuration, for example:
  {"mcpServers": {"errand": {"command": "errand", "args": ["mcp"]}}}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			// Say at once that the daemon is away; each tool call says it
			// again until it is back, so a host may start us first.
			probe, cancel := context.WithTimeout(cmd.Context(), mcpProbeTimeout)
			_, err = c.Status(probe)
			cancel()
			if err != nil && cmd.Context().Err() == nil {
				log.Warn("the errand daemon does not answer yet; tools fail until it does", "server", c.BaseURL(), "err", a.describe(err))
			}
			var in io.Reader = os.Stdin
			if a.stdin != nil {
				in = a.stdin
			}
			err = mcpserver.ServeStdio(cmd.Context(), mcpserver.RemoteBackend(c), &mcpserver.Config{Logger: log}, in, a.stdout)
			if errors.Is(err, context.Canceled) {
				return nil // stopped by a signal, as hosts stop their servers
			}
			return err
		},
	}
}
