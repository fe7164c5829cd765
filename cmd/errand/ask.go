package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/tasktemplate"
)

func (a *app) newAskCmd() *cobra.Command {
	var (
		p            api.CreateTask
		priority     int
		budgetTokens int64
		input        string
		debounceKey  string
		debounceFor  time.Duration
		wait         bool
		quiet        bool
	)
	cmd := &cobra.Command{
		Use:   `ask "<goal>"`,
		Short: "Submit a task; with --wait, follow it to the end",
		Long: `ask submits a task and prints its id.

With --wait it follows the task's events: a live progress line on a terminal,
one line per event otherwise, and the model's words as they come, indented
under them (--quiet hides them). When the task completes it prints the result's
output (a string as it is, other JSON indented) and exits 0; when it fails or
is cancelled it prints the error and exits 1. If the task asks a question, ask
prints it with the command that answers it, and keeps waiting. Ctrl-C stops
the waiting (exit status 130), not the task, and prints how to follow it again.

With --json it prints the task as JSON instead: the new task, or with --wait
the finished one (no events and no live output).`,
		Example: `  errand ask "Summarize https://example.com/report.pdf" --wait
  errand ask "Write the release notes" --agent writer --priority 8 --depends-on tsk_01J…
  errand ask "Rebuild the search index" --debounce-key reindex --debounce-period 30s --concurrency-key repo:web`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p.Goal = strings.Join(args, " ")
			if strings.TrimSpace(p.Goal) == "" {
				return fmt.Errorf("the goal is empty")
			}
			f := cmd.Flags()
			if f.Changed("priority") {
				p.Priority = &priority
			}
			if f.Changed("budget-tokens") {
				if budgetTokens < 1 {
					return fmt.Errorf("--budget-tokens %d: must be at least 1", budgetTokens)
				}
				p.Budget = &errand.Budget{MaxTokens: budgetTokens}
			}
			switch {
			case f.Changed("debounce-key") != f.Changed("debounce-period"):
				return fmt.Errorf("--debounce-key and --debounce-period go together: submits with the key within the period collapse into one task")
			case f.Changed("debounce-key"):
				if debounceKey == "" {
					return fmt.Errorf("--debounce-key: must not be empty")
				}
				if debounceFor <= 0 {
					return fmt.Errorf("--debounce-period %s: must be positive", debounceFor)
				}
				p.Debounce = &tasktemplate.Debounce{Key: debounceKey, Period: debounceFor.String()}
			}
			if input != "" {
				if !json.Valid([]byte(input)) {
					return fmt.Errorf("--input: not valid JSON")
				}
				p.Input = json.RawMessage(input)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			task, err := c.CreateTask(ctx, &p)
			if err != nil {
				return fmt.Errorf("submit: %w", err)
			}
			if !wait {
				if a.asJSON {
					return printJSON(a.stdout, task)
				}
				_, err := fmt.Fprintln(a.stdout, task.ID)
				return err
			}
			if !a.asJSON {
				fmt.Fprintln(a.stdout, task.ID)
			}
			err = a.followTask(ctx, c, task.ID, followOptions{quiet: quiet})
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				// Ctrl-C stops the waiting, not the task.
				return &exitError{code: exitInterrupted, err: &stoppedWaitingError{taskID: task.ID}}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&p.Agent, "agent", "", "agent to run the task (default: the daemon's default agent)")
	f.IntVar(&priority, "priority", 0, "priority; higher runs first")
	f.StringVar(&p.ParentID, "parent", "", "parent task id: submit as its subtask")
	f.StringSliceVar(&p.DependsOn, "depends-on", nil, "task id this task waits for (repeat, or separate with commas)")
	f.StringVar(&p.SessionID, "session", "", "session id; its inbox is told when the task ends")
	f.StringVar(&p.Lane, "lane", "", "lane: at most one task of a lane runs at a time")
	f.StringVar(&p.ConcurrencyKey, "concurrency-key", "", "concurrency key: the daemon's concurrency: config caps how many tasks holding it run at once")
	f.StringVar(&debounceKey, "debounce-key", "", "debounce key: submits with it within --debounce-period collapse into one task, the last")
	f.DurationVar(&debounceFor, "debounce-period", 0, "with --debounce-key: how long after the last submit the task runs, e.g. 5s")
	f.Int64Var(&budgetTokens, "budget-tokens", 0, "most tokens the task may use")
	f.StringVar(&p.Title, "title", "", "short title (default: derived from the goal)")
	f.StringVar(&input, "input", "", "input for the agent, as JSON")
	f.BoolVar(&wait, "wait", false, "follow the task until it ends; exit 0 if it completes, 1 if not")
	f.BoolVarP(&quiet, "quiet", "q", false, "with --wait: do not print the model's words as they come")
	return cmd
}

// stoppedWaitingError is ask --wait's error when it is interrupted: the
// task goes on without it.
type stoppedWaitingError struct{ taskID string }

func (e *stoppedWaitingError) Error() string {
	return fmt.Sprintf("stopped waiting; task %s goes on: errand tasks watch %s", e.taskID, e.taskID)
}
