package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
	"github.com/errandhq/errand/internal/apiclient"
)

// titleWidth bounds the TITLE column.
const titleWidth = 48

// DefaultListLimit is how many tasks `errand tasks` shows by default.
const DefaultListLimit = 50

func (a *app) newTasksCmd() *cobra.Command {
	var (
		statuses []string
		all      bool
		limit    int
		search   string
	)
	cmd := &cobra.Command{
		Use:   "tasks",
		Short: "List tasks, or act on one (see the subcommands)",
		Long: `tasks lists tasks, newest first: the unfinished ones, or with --all every
task, or those in the --status given; --search keeps those whose title or
goal holds the text. PROGRESS is a bar for a task that
reports progress, "waiting" for one that waits (blocked, waiting_subtasks,
input_required, paused), "-" otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, s := range statuses {
				if !errand.Status(s).Valid() {
					return fmt.Errorf("--status %q: want one of %s", s, statusNames())
				}
			}
			if limit < 1 {
				return fmt.Errorf("--limit %d: must be at least 1", limit)
			}
			p := &apiclient.ListTasksParams{Status: statuses, Text: search, Limit: limit}
			if len(statuses) == 0 && !all && search == "" {
				for _, s := range errand.AllStatuses {
					if !s.Terminal() {
						p.Status = append(p.Status, string(s))
					}
				}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.ListTasks(cmd.Context(), p)
			if err != nil {
				return fmt.Errorf("list tasks: %w", err)
			}
			if a.asJSON {
				return printJSON(a.stdout, list)
			}
			if len(list.Tasks) == 0 {
				msg := "no tasks"
				switch {
				case search != "":
					msg = "no tasks hold that text"
				case len(statuses) == 0 && !all:
					msg = "no unfinished tasks (--all shows finished ones)"
				}
				_, err := fmt.Fprintln(a.stdout, msg)
				return err
			}
			if err := a.taskTable(list.Tasks).write(a.stdout); err != nil {
				return err
			}
			if list.NextCursor != "" {
				fmt.Fprintf(a.stdout, "(more: showing the newest %d; raise --limit)\n", len(list.Tasks))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&statuses, "status", nil, "only tasks in this status (repeat, or separate with commas)")
	f.BoolVar(&all, "all", false, "include finished tasks")
	f.StringVar(&search, "search", "", "only tasks whose title or goal holds this text (finished ones too)")
	f.IntVar(&limit, "limit", DefaultListLimit, "most tasks to show")
	cmd.AddCommand(
		a.newTasksShowCmd(),
		a.newTaskActionCmd("cancel", "Cancel a task (a running one stops after its current step)"),
		a.newTaskActionCmd("retry", "Run a failed task again, as a new attempt"),
		a.newTaskActionCmd("pause", "Pause a task: it stops after its current step and is not claimed until resumed"),
		a.newTaskActionCmd("resume", "Resume a paused task"),
		a.newTasksAnswerCmd(),
		a.newTasksWatchCmd(),
		a.newTasksForkCmd(),
		a.newTasksStepsCmd(),
		a.newTasksReadyCmd(),
		a.newTasksBlockedCmd(),
		a.newTasksInputsCmd(),
	)
	return cmd
}

func statusNames() string {
	names := make([]string, len(errand.AllStatuses))
	for i, s := range errand.AllStatuses {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// taskTable is the table of `errand tasks`.
func (a *app) taskTable(tasks []*api.Task) *table {
	color := a.color()
	now := a.now()
	t := &table{}
	t.row(style(color, ansiBold, "ID"), style(color, ansiBold, "STATUS"), style(color, ansiBold, "TITLE"),
		style(color, ansiBold, "PROGRESS"), style(color, ansiBold, "AGE"))
	for _, task := range tasks {
		t.row(task.ID, style(color, statusColor(task.Status), string(task.Status)),
			truncate(taskTitle(task), titleWidth), progressCell(task), age(now, task.CreatedAt))
	}
	return t
}

// newTaskActionCmd is cancel, retry, pause or resume: one call, then the
// task's new status.
func (a *app) newTaskActionCmd(action, short string) *cobra.Command {
	var (
		reason  string
		subtree bool
	)
	cmd := &cobra.Command{
		Use:     action + " ID",
		Example: "  errand tasks " + action + " tsk_01JH8W0Q5Q7J6YQ2C2WJ3K4M5N",
		Short:   short,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx, id := cmd.Context(), args[0]
			var task *api.Task
			switch action {
			case "cancel":
				task, err = c.CancelTask(ctx, id, reason)
			case "retry":
				task, err = c.RetryTask(ctx, id)
			case "pause":
				task, err = c.PauseTask(ctx, id, subtree)
			case "resume":
				task, err = c.ResumeTask(ctx, id, subtree)
			}
			if err != nil {
				return fmt.Errorf("%s %s: %w", action, id, err)
			}
			if a.asJSON {
				return printJSON(a.stdout, task)
			}
			_, err = fmt.Fprintf(a.stdout, "%s: %s\n", task.ID, style(a.color(), statusColor(task.Status), string(task.Status)))
			return err
		},
	}
	switch action {
	case "cancel":
		cmd.Flags().StringVar(&reason, "reason", "", "why, recorded in the task's history")
	case "pause", "resume":
		cmd.Flags().BoolVar(&subtree, "subtree", false, "also "+action+" the task's subtasks")
	}
	return cmd
}

func (a *app) newTasksShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "show ID",
		Example: "  errand tasks show tsk_01JH8W0Q5Q7J6YQ2C2WJ3K4M5N",
		Short:   "Show a task: fields, plan, recent steps, result or error, spend",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			task, err := c.GetTask(ctx, args[0])
			if err != nil {
				return fmt.Errorf("show %s: %w", args[0], err)
			}
			if a.asJSON {
				return printJSON(a.stdout, task)
			}
			steps, err := c.ListSteps(ctx, task.ID)
			if err != nil {
				return fmt.Errorf("show %s: %w", task.ID, err)
			}
			var inputs []*api.Input
			if task.Status == errand.StatusInputRequired {
				list, err := c.ListInputs(ctx, errand.InputPending)
				if err != nil {
					return fmt.Errorf("show %s: %w", task.ID, err)
				}
				for _, in := range list.Inputs {
					if in.TaskID == task.ID {
						inputs = append(inputs, in)
					}
				}
			}
			return a.showTask(task, steps.Steps, inputs)
		},
	}
}

// shownSteps is how many of the last steps `tasks show` lists.
const shownSteps = 10

func (a *app) showTask(t *api.Task, steps []*api.Step, inputs []*api.Input) error {
	color := a.color()
	now := a.now()
	w := a.stdout
	head := func(s string) string { return style(color, ansiBold, s) }

	fields := &table{}
	field := func(name, value string) {
		if value != "" {
			fields.row(head(name), value)
		}
	}
	field("ID", t.ID)
	field("Title", truncate(t.Title, 100))
	status := style(color, statusColor(t.Status), string(t.Status))
	if t.MaxAttempts > 0 {
		status += fmt.Sprintf(" (attempt %d of %d)", t.Attempt, t.MaxAttempts)
	}
	field("Status", status)
	if t.Progress != nil {
		field("Progress", progressText(t.Progress))
	}
	field("Agent", t.Agent)
	field("Priority", itoa(t.Priority))
	if t.ParentID != nil {
		field("Parent", *t.ParentID)
	}
	field("Forked from", forkedFromText(t))
	field("Forks", strings.Join(t.Forks, ", "))
	if t.SessionID != nil {
		field("Session", *t.SessionID)
	}
	if len(t.DependsOn) > 0 {
		field("Depends on", strings.Join(t.DependsOn, ", "))
	}
	if len(t.Tags) > 0 {
		field("Tags", strings.Join(t.Tags, ", "))
	}
	field("Created", fmt.Sprintf("%s (%s ago)", t.CreatedAt.Local().Format("2006-01-02 15:04:05"), age(now, t.CreatedAt)))
	if t.RunAt != nil && t.RunAt.After(now) {
		field("Runs at", t.RunAt.Local().Format("2006-01-02 15:04:05"))
	}
	if t.StartedAt != nil {
		field("Started", t.StartedAt.Local().Format("2006-01-02 15:04:05"))
	}
	if t.FinishedAt != nil {
		field("Finished", t.FinishedAt.Local().Format("2006-01-02 15:04:05"))
	}
	field("Spent", spentText(t.Consumed, t.Budget))
	if err := fields.write(w); err != nil {
		return err
	}

	fmt.Fprintf(w, "\n%s\n", head("Goal"))
	for _, l := range strings.Split(strings.TrimRight(t.Goal, "\n"), "\n") {
		fmt.Fprintf(w, "  %s\n", l)
	}

	var plan []planItem
	if len(t.Plan) > 0 && json.Unmarshal(t.Plan, &plan) == nil && len(plan) > 0 {
		fmt.Fprintf(w, "\n%s\n", head("Plan"))
		for _, p := range plan {
			mark := planMark(p.Status)
			switch p.Status {
			case "completed":
				mark = style(color, ansiGreen, mark)
			case "in_progress":
				mark = style(color, ansiCyan, mark)
			}
			fmt.Fprintf(w, "  %s %s\n", mark, cmpStr(p.Title, p.ID))
		}
	}

	for _, in := range inputs {
		fmt.Fprintf(w, "\n%s %s\n", head("Question"), style(color, ansiDim, "("+in.ID+")"))
		fmt.Fprintf(w, "  %s\n  answer with: errand tasks answer %s \"…\"\n", in.Question, t.ID)
	}

	if len(steps) > 0 {
		shown := steps
		title := fmt.Sprintf("Steps (%d)", len(steps))
		if len(steps) > shownSteps {
			shown = steps[len(steps)-shownSteps:]
			title = fmt.Sprintf("Steps (last %d of %d; errand tasks steps %s lists all)", shownSteps, len(steps), t.ID)
		}
		fmt.Fprintf(w, "\n%s\n", head(title))
		tb := stepTable(shown, color)
		tb.indent = "  "
		if err := tb.write(w); err != nil {
			return err
		}
	}

	if len(t.Result) > 0 && string(t.Result) != "null" {
		fmt.Fprintf(w, "\n%s\n", head("Result"))
		warning, err := printResult(w, t.Result)
		if err != nil {
			return err
		}
		if warning != "" {
			fmt.Fprintf(w, "%s %s\n", style(color, ansiYellow, "warning:"), warning)
		}
	}
	if t.Error != nil {
		fmt.Fprintf(w, "\n%s\n  %s\n", head("Error"), style(color, ansiRed, errorText(t.Error)))
	}
	return nil
}

func cmpStr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// spentText is what a task consumed, against its budget where it has one.
func spentText(c *errand.Consumed, b *errand.Budget) string {
	if c == nil {
		c = &errand.Consumed{}
	}
	if b == nil {
		b = &errand.Budget{}
	}
	var parts []string
	part := func(used string, limit string) {
		if limit != "" {
			used += " of " + limit
		}
		parts = append(parts, used)
	}
	lim := func(set bool, s string) string {
		if !set {
			return ""
		}
		return s
	}
	part(fmt.Sprintf("%d tokens", c.Tokens), lim(b.MaxTokens > 0, fmt.Sprint(b.MaxTokens)))
	part(money(c.CostUSD), lim(b.MaxCostUSD > 0, money(b.MaxCostUSD)))
	part(fmt.Sprintf("%d tool calls", c.ToolCalls), lim(b.MaxToolCalls > 0, itoa(b.MaxToolCalls)))
	part(duration(c.WallClockMS), lim(b.MaxWallClock > 0, time.Duration(b.MaxWallClock).String()))
	return strings.Join(parts, ", ")
}

// stepTable lists steps.
func stepTable(steps []*api.Step, color bool) *table {
	t := &table{}
	h := func(s string) string { return style(color, ansiBold, s) }
	t.row(h("STEP"), h("TYPE"), h("TOOL"), h("STATUS"), h("TOKENS"), h("COST"), h("TIME"), h("ERROR"))
	for _, s := range steps {
		tool, errCode := "-", ""
		if s.Tool != nil {
			tool = *s.Tool
		}
		if s.ErrorCode != nil {
			errCode = *s.ErrorCode
		}
		t.row(stepNo(s.StepNo, s.CallIndex), s.Type, tool, stepStatus(s, color),
			fmt.Sprintf("%d/%d", s.TokensIn, s.TokensOut), money(s.CostUSD), duration(s.DurationMS), errCode)
	}
	return t
}

func (a *app) newTasksAnswerCmd() *cobra.Command {
	return &cobra.Command{
		Use:     `answer ID "text"`,
		Example: `  errand tasks answer tsk_01JH8W0Q5Q7J6YQ2C2WJ3K4M5N "Use the staging database"`,
		Short:   "Answer the question a task asked (ID: the task's id or the question's inp_ id)",
		Long: `answer answers the open question of a task in input_required. ID is the
task's id, or the id of the question itself (inp_…, see "errand tasks inputs").
A text of "-" reads the answer from stdin.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, text := args[0], args[1]
			if text == "-" {
				b, err := io.ReadAll(cmd.InOrStdin())
				if err != nil {
					return fmt.Errorf("read the answer: %w", err)
				}
				text = strings.TrimRight(string(b), "\n")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			taskID, req := id, &api.AnswerInput{Answer: text}
			if strings.HasPrefix(id, "inp_") {
				list, err := c.ListInputs(ctx, errand.InputPending)
				if err != nil {
					return fmt.Errorf("answer %s: %w", id, err)
				}
				i := slices.IndexFunc(list.Inputs, func(in *api.Input) bool { return in.ID == id })
				if i < 0 {
					return fmt.Errorf("answer %s: no pending question with this id", id)
				}
				taskID, req.RequestID = list.Inputs[i].TaskID, id
			}
			in, err := c.AnswerInput(ctx, taskID, req)
			if err != nil {
				return fmt.Errorf("answer %s: %w", id, err)
			}
			if a.asJSON {
				return printJSON(a.stdout, in)
			}
			_, err = fmt.Fprintf(a.stdout, "answered %s of %s\n", in.ID, in.TaskID)
			return err
		},
	}
}

func (a *app) newTasksWatchCmd() *cobra.Command {
	var quiet bool
	cmd := &cobra.Command{
		Use:     "watch ID",
		Example: "  errand tasks watch tsk_01JH8W0Q5Q7J6YQ2C2WJ3K4M5N",
		Short:   "Follow a task's events until it ends (exit 0 if it completes, 1 if not)",
		Long: `watch prints a task's events, from the first, and follows it until it ends:
then it prints the result and exits 0, or prints the error and exits 1 if the
task failed or was cancelled. The model's words are printed as they come,
indented under the events (--quiet hides them). With --json it prints each
event as a JSON line, and each piece of live output as one with id 0 and
type task.output.delta.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			task, err := c.GetTask(ctx, args[0])
			if err != nil {
				return fmt.Errorf("watch %s: %w", args[0], err)
			}
			return a.followTask(ctx, c, task.ID, followOptions{eventsJSON: true, quiet: quiet})
		},
	}
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "do not print the model's words as they come")
	return cmd
}

func (a *app) newTasksStepsCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "steps ID",
		Example: "  errand tasks steps tsk_01JH8W0Q5Q7J6YQ2C2WJ3K4M5N",
		Short:   "List a task's steps: LLM calls, tool calls, subtasks, questions",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.ListSteps(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("steps of %s: %w", args[0], err)
			}
			if done, err := a.printListStart(list, len(list.Steps), "no steps yet"); done {
				return err
			}
			return stepTable(list.Steps, a.color()).write(a.stdout)
		},
	}
}

func (a *app) newTasksReadyCmd() *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "ready",
		Short: "List the tasks a worker could claim now, best first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.ReadyTasks(cmd.Context(), limit)
			if err != nil {
				return fmt.Errorf("ready tasks: %w", err)
			}
			if done, err := a.printListStart(list, len(list.Tasks), "no ready tasks"); done {
				return err
			}
			return a.taskTable(list.Tasks).write(a.stdout)
		},
	}
	cmd.Flags().IntVar(&limit, "limit", DefaultListLimit, "most tasks to show")
	return cmd
}

func (a *app) newTasksBlockedCmd() *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "blocked",
		Short: "List blocked tasks and the tasks they wait for",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.BlockedTasks(cmd.Context(), limit)
			if err != nil {
				return fmt.Errorf("blocked tasks: %w", err)
			}
			if done, err := a.printListStart(list, len(list.Tasks), "no blocked tasks"); done {
				return err
			}
			color, now := a.color(), a.now()
			h := func(s string) string { return style(color, ansiBold, s) }
			t := &table{}
			t.row(h("ID"), h("STATUS"), h("TITLE"), h("BLOCKED BY"), h("AGE"))
			for _, b := range list.Tasks {
				if b.Task == nil {
					continue
				}
				t.row(b.Task.ID, style(color, statusColor(b.Task.Status), string(b.Task.Status)),
					truncate(taskTitle(b.Task), titleWidth), strings.Join(b.BlockedBy, ", "), age(now, b.Task.CreatedAt))
			}
			return t.write(a.stdout)
		},
	}
	cmd.Flags().IntVar(&limit, "limit", DefaultListLimit, "most tasks to show")
	return cmd
}

func (a *app) newTasksInputsCmd() *cobra.Command {
	var status string
	cmd := &cobra.Command{
		Use:   "inputs",
		Short: "List the questions tasks asked",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if status == "all" {
				status = ""
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.ListInputs(cmd.Context(), status)
			if err != nil {
				return fmt.Errorf("inputs: %w", err)
			}
			if done, err := a.printListStart(list, len(list.Inputs), "no questions"); done {
				return err
			}
			color, now := a.color(), a.now()
			h := func(s string) string { return style(color, ansiBold, s) }
			t := &table{}
			t.row(h("ID"), h("TASK"), h("STATUS"), h("QUESTION"), h("AGE"))
			for _, in := range list.Inputs {
				t.row(in.ID, in.TaskID, in.Status, truncate(in.Question, 60), age(now, in.CreatedAt))
			}
			return t.write(a.stdout)
		},
	}
	cmd.Flags().StringVar(&status, "status", errand.InputPending, "pending, answered, expired, cancelled or all")
	return cmd
}

// printListStart prints a list as JSON with --json, or says empty when it
// has no entries; done reports whether that was all there was to print.
func (a *app) printListStart(list any, entries int, empty string) (done bool, err error) {
	if a.asJSON {
		return true, printJSON(a.stdout, list)
	}
	if entries == 0 {
		_, err := fmt.Fprintln(a.stdout, empty)
		return true, err
	}
	return false, nil
}
