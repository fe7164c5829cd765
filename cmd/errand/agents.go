package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/errandhq/errand"
)

func (a *app) newAgentsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "Show each agent's tasks, limit and pause; pause or resume one",
		Long: `agents lists every agent (and every concurrency key) with the tasks it has
running and pending, how many of those wait for the model provider's rate
limit, its concurrency limit and whether it is paused.

A paused agent's tasks stay pending, across every daemon of the store;
its running tasks finish their current step and wait. Schedules that
submit to it still fire and their tasks wait. resume lets them run at once.`,
		Example: `  errand agents
  errand agents pause writer
  errand agents resume writer`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			all, err := c.Agents(cmd.Context())
			if err != nil {
				return fmt.Errorf("agents: %w", err)
			}
			return a.printAgents(all)
		},
	}
	cmd.AddCommand(a.newAgentPauseCmd(true), a.newAgentPauseCmd(false))
	return cmd
}

func (a *app) newAgentPauseCmd(pause bool) *cobra.Command {
	use, short := "resume NAME", "Let a paused agent's tasks run again"
	if pause {
		use, short = "pause NAME", "Hold an agent's tasks pending; running ones stop after their step"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			set, verb := c.ResumeAgent, "resume"
			if pause {
				set, verb = c.PauseAgent, "pause"
			}
			ag, err := set(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("agents %s %s: %w", verb, args[0], err)
			}
			if a.asJSON {
				return printJSON(a.stdout, ag)
			}
			if ag.Paused {
				_, err = fmt.Fprintf(a.stdout, "agent %s paused %s: %s\n", ag.Name, pausedSince(ag), agentHolds(ag))
			} else {
				_, err = fmt.Fprintf(a.stdout, "agent %s runs: %s\n", ag.Name, agentHolds(ag))
			}
			return err
		},
	}
}

// agentHolds says what an agent holds, for a line after a pause or resume.
func agentHolds(ag *errand.AgentState) string {
	return fmt.Sprintf("%d running, %d pending", ag.Running, ag.Pending)
}

// pausedSince says since when a paused agent is.
func pausedSince(ag *errand.AgentState) string {
	if ag.PausedAt == nil {
		return "yes"
	}
	return "since " + ag.PausedAt.Local().Format(time.RFC3339)
}

func (a *app) printAgents(all *errand.AgentStates) error {
	if done, err := a.printListStart(all, len(all.Agents)+len(all.Keys), "no agents"); done {
		return err
	}
	color := a.color()
	h := func(s string) string { return style(color, ansiBold, s) }
	limit := func(l *int) string {
		if l == nil {
			return "-"
		}
		return strconv.Itoa(*l)
	}
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	t := &table{}
	t.row(h("AGENT"), h("KIND"), h("MODEL"), h("RUNNING"), h("PENDING"), h("RATE-LIMITED"), h("LIMIT"), h("PAUSED"))
	for _, ag := range all.Agents {
		paused := style(color, ansiDim, "no")
		if ag.Paused {
			paused = style(color, ansiYellow, pausedSince(ag))
		}
		t.row(ag.Name, dash(ag.Kind), dash(ag.Model), strconv.Itoa(ag.Running), strconv.Itoa(ag.Pending),
			strconv.Itoa(ag.RateLimited), limit(ag.Limit), paused)
	}
	if err := t.write(a.stdout); err != nil || len(all.Keys) == 0 {
		return err
	}
	// Keys get a table of their own: a long key would otherwise widen
	// the agents' first column.
	keys := &table{}
	keys.row(h("KEY"), h("RUNNING"), h("PENDING"), h("LIMIT"))
	for _, k := range all.Keys {
		keys.row(k.Key, strconv.Itoa(k.Running), strconv.Itoa(k.Pending), limit(k.Limit))
	}
	if _, err := fmt.Fprintln(a.stdout); err != nil {
		return err
	}
	return keys.write(a.stdout)
}
