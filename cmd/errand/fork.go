package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
)

func (a *app) newTasksForkCmd() *cobra.Command {
	var (
		p        api.ForkTask
		fromStep int
		answer   string
		input    string
		wait     bool
	)
	cmd := &cobra.Command{
		Use:   "fork ID --from-step N",
		Short: "Rerun a task from one of its steps, as a new task",
		Long: `fork makes a new task that reruns task ID from step N and prints its id.
The steps before N are copied from ID as done: their outputs are replayed,
never run or paid for again. Step N and those after it run live.

--goal, --input and --agent change what the fork is asked and who runs it;
--answer replaces the answer to the last question the task asked before
step N, the answer step N on ran with ("-" reads it from stdin). With --wait
it follows the fork as "errand ask --wait" does.`,
		Example: `  errand tasks fork tsk_01JH8W0Q5Q7J6YQ2C2WJ3K4M5N --from-step 3
  errand tasks fork tsk_01JH8W0Q5Q7J6YQ2C2WJ3K4M5N --from-step 5 --answer "Use the staging database" --wait`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			if !f.Changed("from-step") {
				return fmt.Errorf("--from-step is required: the first step the fork runs live (see errand tasks steps %s)", args[0])
			}
			if fromStep < 1 {
				return fmt.Errorf("--from-step %d: must be 1 or more", fromStep)
			}
			p.FromStep = &fromStep
			if f.Changed("answer") {
				if answer == "-" {
					b, err := io.ReadAll(cmd.InOrStdin())
					if err != nil {
						return fmt.Errorf("read the answer: %w", err)
					}
					answer = strings.TrimRight(string(b), "\n")
				}
				if strings.TrimSpace(answer) == "" {
					return fmt.Errorf("--answer: the answer is empty")
				}
				p.Answer = &answer
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
			task, err := c.ForkTask(ctx, args[0], &p)
			if err != nil {
				return fmt.Errorf("fork %s: %w", args[0], err)
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
			err = a.follow(ctx, c, task.ID, false)
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return &exitError{code: exitInterrupted, err: &stoppedWaitingError{taskID: task.ID}}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.IntVar(&fromStep, "from-step", 0, "the first step the fork runs live; the steps before it are copied (required)")
	f.StringVar(&p.Goal, "goal", "", "a new goal (default: the source's)")
	f.StringVar(&answer, "answer", "", `replaces the answer to the last question asked before the step ("-" reads stdin)`)
	f.StringVar(&p.Agent, "agent", "", "the agent that runs the fork (default: the source's)")
	f.StringVar(&input, "input", "", "new input for the agent, as JSON (default: the source's)")
	f.BoolVar(&wait, "wait", false, "follow the fork until it ends; exit 0 if it completes, 1 if not")
	return cmd
}

// forkedFromText says where a fork began: "tsk_… at step 3".
func forkedFromText(t *api.Task) string {
	if t.ForkedFrom == nil {
		return ""
	}
	return fmt.Sprintf("%s at step %d", t.ForkedFrom.TaskID, t.ForkedFrom.StepNo)
}

// stepStatus is a step's status as the step tables show it: coloured,
// and for a step a fork copied, where it was copied from.
func stepStatus(s *api.Step, color bool) string {
	st := s.Status
	switch st {
	case errand.StepDone:
		st = style(color, ansiGreen, st)
	case errand.StepFailed, errand.StepDenied:
		st = style(color, ansiRed, st)
	}
	if s.CopiedFrom != nil {
		st += style(color, ansiDim, " (copied from "+*s.CopiedFrom+")")
	}
	return st
}
