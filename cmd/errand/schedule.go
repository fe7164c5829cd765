package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/api"
)

// shownRuns is how many coming firings `schedule show` lists.
const shownRuns = 5

// specWidth bounds the SPEC column of `schedule list`.
const specWidth = 40

func (a *app) newScheduleCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "schedule",
		Aliases: []string{"schedules"},
		Short:   "List schedules, or add, show, remove, enable, disable or run one",
		Long: `schedule lists the schedules: work that starts by itself, at times (cron,
interval, heartbeat) or when an event is journaled (event). The subcommands
add, show, remove, enable, disable and run one; NAME|ID is a schedule's name
or its sch_ id.`,
		Args: cobra.NoArgs,
		RunE: a.listSchedules,
	}
	cmd.AddCommand(
		a.newScheduleAddCmd(),
		&cobra.Command{
			Use:   "list",
			Short: "List schedules: kind, spec, whether enabled, next run, firings",
			Args:  cobra.NoArgs,
			RunE:  a.listSchedules,
		},
		a.newScheduleShowCmd(),
		a.newScheduleRmCmd(),
		a.newScheduleEnableCmd("enable", true),
		a.newScheduleEnableCmd("disable", false),
		a.newScheduleRunCmd(),
	)
	return cmd
}

// scheduleAdd is what `schedule add` reads from its flags.
type scheduleAdd struct {
	cron, every, heartbeat, onEvent string
	match                           []string
	timezone, catchUp, activeHours  string
	overlap, stuckAfter             string
	escalateTo                      string
	maxEscalations                  int
	maxEscalationsSet               bool
	disabled                        bool
	agent, goal, title, promptFile  string
	taskJSON                        string
}

func (a *app) newScheduleAddCmd() *cobra.Command {
	var o scheduleAdd
	cmd := &cobra.Command{
		Use:   "add NAME [GOAL...]",
		Short: "Add a schedule: --cron, --every, --heartbeat or --on-event, and the task it makes",
		Long: `add stores a schedule and prints when it first runs.

Give exactly one of:
  --cron EXPR       a five-field cron expression (or @hourly, @daily…), read in --tz
  --every DUR       an interval: a Go duration of at least 1s (30s, 15m, 2h)
  --heartbeat DUR   a heartbeat scout every DUR, within --active-hours
  --on-event TYPE   every journaled event of TYPE (task.failed, deploy.finished…)
                    whose fields equal each --match KEY=VALUE

The task it makes is the goal (the arguments after NAME, or --goal), for
--agent, with --title; a heartbeat may read its goal from --prompt-file at each
firing. --task-json gives a whole template (a POST /api/tasks body) instead;
the other task flags then set their fields in it.

A --match VALUE is read as JSON when it is JSON (5, true, "5", {"a":1}),
else as a string: --match env=prod is "prod".`,
		Example: `  errand schedule add digest --cron "0 9 * * 1-5" --tz Europe/Berlin "Summarize the news"
  errand schedule add poll --every 15m --agent shell --goal "Check the queue"
  errand schedule add scout --heartbeat 10m --active-hours 08:00-22:00 --prompt-file HEARTBEAT.md
  errand schedule add triage --on-event task.failed --match agent=shell "Find out why it failed"`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.maxEscalationsSet = cmd.Flags().Changed("max-escalations-per-day")
			body, err := o.request(args[0], strings.Join(args[1:], " "), cmd.Flags().Changed("goal"))
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			sc, err := c.CreateSchedule(cmd.Context(), body)
			if err != nil {
				return fmt.Errorf("add %s: %w", args[0], err)
			}
			if a.asJSON {
				return printJSON(a.stdout, sc)
			}
			_, err = fmt.Fprintf(a.stdout, "added %s (%s): %s\n", sc.Name, sc.ID, a.nextRunText(sc))
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.cron, "cron", "", "cron expression: minute hour day-of-month month day-of-week")
	f.StringVar(&o.every, "every", "", "interval, a Go duration such as 15m")
	f.StringVar(&o.heartbeat, "heartbeat", "", "heartbeat period, a Go duration such as 10m")
	f.StringVar(&o.onEvent, "on-event", "", "event type to run on, such as task.failed")
	f.StringArrayVar(&o.match, "match", nil, "with --on-event: KEY=VALUE the event (or its task) must have (repeat)")
	f.StringVar(&o.timezone, "tz", "", "IANA time zone of --cron and --active-hours (default UTC)")
	f.StringVar(&o.catchUp, "catch-up", "", "after downtime: one (run once for the missed firings; default) or none")
	f.StringVar(&o.overlap, "overlap", "", "while its last task has not ended, a firing: skip (default; allow_all with --on-event), buffer_one (waits for it), allow_all or cancel_previous")
	f.StringVar(&o.activeHours, "active-hours", "", "with --heartbeat: HH:MM-HH:MM of the day it runs in")
	f.StringVar(&o.stuckAfter, "stuck-after", "", "with --heartbeat: how long a task runs before the scout hears it may be stuck (default 30m)")
	f.StringVar(&o.escalateTo, "escalate-to", "", "with --heartbeat: the agent that gets a task for each escalation the scout raises")
	f.IntVar(&o.maxEscalations, "max-escalations-per-day", 3, "with --escalate-to: at most this many escalations a day (UTC); 0 makes none")
	f.BoolVar(&o.disabled, "disabled", false, "add it disabled (enable it with: errand schedule enable NAME)")
	f.StringVar(&o.agent, "agent", "", "agent to run the tasks (default: the daemon's default agent)")
	f.StringVar(&o.goal, "goal", "", "goal of the tasks (or give it after NAME)")
	f.StringVar(&o.title, "title", "", "title of the tasks")
	f.StringVar(&o.promptFile, "prompt-file", "", "with --heartbeat: file the goal is read from at each firing")
	f.StringVar(&o.taskJSON, "task-json", "", "the whole task template, a POST /api/tasks body as JSON")
	return cmd
}

// request builds the POST /api/schedules body of `schedule add`.
func (o *scheduleAdd) request(name, argGoal string, goalFlag bool) (*api.CreateSchedule, error) {
	body := &api.CreateSchedule{Name: name, Timezone: o.timezone, CatchUp: o.catchUp, Overlap: o.overlap,
		ActiveHours: o.activeHours, StuckAfter: o.stuckAfter, EscalateTo: o.escalateTo}
	if o.maxEscalationsSet {
		if o.escalateTo == "" {
			return nil, errors.New("--max-escalations-per-day goes with --escalate-to")
		}
		body.MaxEscalationsPerDay = &o.maxEscalations
	}
	var kinds []string
	for _, k := range []struct{ flag, kind, value string }{
		{"--cron", errand.ScheduleCron, o.cron},
		{"--every", errand.ScheduleInterval, o.every},
		{"--heartbeat", errand.ScheduleHeartbeat, o.heartbeat},
		{"--on-event", errand.ScheduleEvent, o.onEvent},
	} {
		if k.value != "" {
			kinds = append(kinds, k.flag)
			body.Kind, body.Spec = k.kind, api.StringSpec(k.value)
		}
	}
	if len(kinds) != 1 {
		return nil, errors.New("give exactly one of --cron, --every, --heartbeat and --on-event")
	}
	if len(o.match) > 0 && body.Kind != errand.ScheduleEvent {
		return nil, errors.New("--match goes with --on-event")
	}
	if body.Kind == errand.ScheduleEvent {
		spec, err := eventSpec(o.onEvent, o.match)
		if err != nil {
			return nil, err
		}
		body.Spec = spec
	}
	if o.disabled {
		off := false
		body.Enabled = &off
	}

	task := map[string]json.RawMessage{}
	if o.taskJSON != "" {
		dec := json.NewDecoder(strings.NewReader(o.taskJSON))
		if err := dec.Decode(&task); err != nil || task == nil || dec.More() {
			return nil, errors.New("--task-json: must be one JSON object, a POST /api/tasks body")
		}
	}
	goal := o.goal
	switch {
	case goalFlag && argGoal != "":
		return nil, errors.New("give the goal after NAME or with --goal, not both")
	case !goalFlag:
		goal = argGoal
	}
	promptFile := o.promptFile
	if promptFile != "" {
		// The daemon reads it; a relative path means one from here.
		abs, err := filepath.Abs(promptFile)
		if err != nil {
			return nil, fmt.Errorf("--prompt-file: %w", err)
		}
		promptFile = abs
	}
	for key, v := range map[string]string{"goal": goal, "agent": o.agent, "title": o.title, "prompt_file": promptFile} {
		if strings.TrimSpace(v) != "" {
			task[key] = api.StringSpec(v) // a JSON string
		}
	}
	if _, ok := task["goal"]; !ok {
		if _, ok := task["prompt_file"]; !ok {
			return nil, errors.New("the tasks need a goal: give it after NAME, with --goal, in --task-json, or --prompt-file for a heartbeat")
		}
	}
	b, err := json.Marshal(task)
	if err != nil {
		return nil, fmt.Errorf("--task-json: %w", err)
	}
	body.Task = b
	return body, nil
}

// eventSpec is the spec of an event schedule: {"type", "match"}.
func eventSpec(typ string, matches []string) (json.RawMessage, error) {
	spec := struct {
		Type  string                     `json:"type"`
		Match map[string]json.RawMessage `json:"match,omitempty"`
	}{Type: typ}
	for _, m := range matches {
		key, value, ok := strings.Cut(m, "=")
		if !ok || key == "" {
			return nil, fmt.Errorf("--match %q: want KEY=VALUE", m)
		}
		if spec.Match == nil {
			spec.Match = map[string]json.RawMessage{}
		}
		if _, dup := spec.Match[key]; dup {
			return nil, fmt.Errorf("--match %s: given twice", key)
		}
		if json.Valid([]byte(value)) {
			spec.Match[key] = json.RawMessage(value)
		} else {
			spec.Match[key] = api.StringSpec(value)
		}
	}
	return json.Marshal(spec)
}

func (a *app) listSchedules(cmd *cobra.Command, args []string) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	list, err := c.ListSchedules(cmd.Context())
	if err != nil {
		return fmt.Errorf("list schedules: %w", err)
	}
	if done, err := a.printListStart(list, len(list.Schedules), "no schedules (add one with: errand schedule add)"); done {
		return err
	}
	color := a.color()
	h := func(s string) string { return style(color, ansiBold, s) }
	t := &table{}
	t.row(h("NAME"), h("KIND"), h("SPEC"), h("ENABLED"), h("NEXT RUN"), h("FIRES"))
	for _, sc := range list.Schedules {
		enabled := style(color, ansiGreen, "yes")
		if !sc.Enabled {
			enabled = style(color, ansiDim, "no")
		}
		next := "-"
		if sc.NextRunAt != nil {
			next = a.whenText(sc, *sc.NextRunAt)
		}
		t.row(sc.Name, sc.Kind, truncate(specCell(sc), specWidth), enabled, next, fmt.Sprint(sc.FireCount))
	}
	return t.write(a.stdout)
}

// specCell is a schedule's spec for people: the expression or period (and
// its zone), or the event type and what it must match.
func specCell(sc *api.Schedule) string {
	if sc.Kind == errand.ScheduleEvent {
		var es struct {
			Type  string                     `json:"type"`
			Match map[string]json.RawMessage `json:"match"`
		}
		if json.Unmarshal(sc.Spec, &es) != nil {
			return sc.SpecText()
		}
		parts := []string{es.Type}
		for _, k := range slices.Sorted(maps.Keys(es.Match)) {
			parts = append(parts, k+"="+matchValue(es.Match[k]))
		}
		return strings.Join(parts, " ")
	}
	s := sc.SpecText()
	if sc.Timezone != "" {
		s += " (" + sc.Timezone + ")"
	}
	return s
}

// matchValue is a match value as --match takes it: a string bare unless it
// would read as other JSON.
func matchValue(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil && !json.Valid([]byte(s)) {
		return s
	}
	return compactJSON(raw)
}

// zone is the location a schedule's times are read in: its timezone, UTC
// when it names none (or one this binary does not know).
func zone(sc *api.Schedule) *time.Location {
	if sc.Timezone == "" {
		return time.UTC
	}
	loc, err := time.LoadLocation(sc.Timezone)
	if err != nil {
		return time.UTC
	}
	return loc
}

// whenText is a time of a schedule in its zone, and how far off it is; to
// the second when the schedule's runs need seconds to tell apart (a run
// every 10 s that falls on a whole minute is still shown to the second).
func (a *app) whenText(sc *api.Schedule, t time.Time) string {
	layout := "2006-01-02 15:04 MST"
	runs := nextRuns(sc, 2) // from sc's next run, which t is
	if len(runs) == 0 {
		runs = []time.Time{t}
	}
	if subMinute(runs) {
		layout = "2006-01-02 15:04:05 MST"
	}
	s, at := t.In(zone(sc)).Format(layout), a.now()
	if t.After(at) {
		return s + " (in " + age(t, at) + ")"
	}
	return s + " (" + age(at, t) + " ago)"
}

// nextRunText says when a schedule runs next, or why it does not.
func (a *app) nextRunText(sc *api.Schedule) string {
	switch {
	case !sc.Enabled:
		return "disabled"
	case sc.Kind == errand.ScheduleEvent:
		return "runs on " + specCell(sc)
	case sc.NextRunAt == nil:
		return "no run is due"
	}
	return "next run " + a.whenText(sc, *sc.NextRunAt)
}

// nextRuns is the coming firings of a schedule, from its next run.
func nextRuns(sc *api.Schedule, n int) []time.Time {
	if sc.NextRunAt == nil {
		return nil
	}
	return errand.NextRuns(&errand.Schedule{
		Kind: sc.Kind, Spec: sc.SpecText(), Timezone: sc.Timezone, ActiveHours: sc.ActiveHours, NextRunAt: *sc.NextRunAt,
	}, n)
}

func (a *app) newScheduleShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "show NAME|ID",
		Example: "  errand schedule show digest",
		Short:   "Show a schedule: its fields, its task template and its next five runs",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			sc, err := c.GetSchedule(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("show %s: %w", args[0], err)
			}
			if a.asJSON {
				return printJSON(a.stdout, sc)
			}
			return a.showSchedule(sc)
		},
	}
}

func (a *app) showSchedule(sc *api.Schedule) error {
	color := a.color()
	w := a.stdout
	head := func(s string) string { return style(color, ansiBold, s) }
	local := func(t time.Time) string { return t.In(zone(sc)).Format("2006-01-02 15:04:05 MST") }

	fields := &table{}
	field := func(name, value string) {
		if value != "" {
			fields.row(head(name), value)
		}
	}
	field("ID", sc.ID)
	field("Name", sc.Name)
	field("Kind", sc.Kind)
	field("Spec", sc.SpecText())
	if sc.Kind != errand.ScheduleEvent {
		field("Timezone", cmpStr(sc.Timezone, "UTC"))
		field("Catch-up", sc.CatchUp)
	}
	field("Overlap", sc.Overlap)
	field("Active hours", sc.ActiveHours)
	if sc.StuckAfter != nil {
		field("Stuck after", sc.StuckAfter.String())
	}
	if sc.EscalateTo != nil && *sc.EscalateTo != "" {
		text := *sc.EscalateTo
		if n := sc.MaxEscalationsPerDay; n != nil {
			text += fmt.Sprintf(" (at most %d a day, UTC)", *n)
		}
		field("Escalates to", text)
	}
	enabled := style(color, ansiGreen, "yes")
	if !sc.Enabled {
		enabled = style(color, ansiDim, "no")
	}
	field("Enabled", enabled)
	if sc.Declared {
		field("Declared", "yes, in errand.yaml (remove it there)")
	}
	fired := fmt.Sprintf("%d times", sc.FireCount)
	if sc.FireCount == 1 {
		fired = "once"
	}
	if sc.LastRunAt != nil {
		fired += ", last " + local(*sc.LastRunAt)
		if sc.LastTaskID != nil {
			fired += " (" + *sc.LastTaskID + ")"
		}
	}
	field("Fired", fired)
	field("Created", local(sc.CreatedAt))
	if err := fields.write(w); err != nil {
		return err
	}

	fmt.Fprintf(w, "\n%s\n", head("Task"))
	var buf bytes.Buffer
	if json.Indent(&buf, sc.Task, "  ", "  ") != nil {
		buf.Reset()
		buf.Write(sc.Task)
	}
	fmt.Fprintf(w, "  %s\n", buf.String())

	runs := nextRuns(sc, shownRuns)
	fmt.Fprintf(w, "\n%s\n", head("Next runs"))
	switch {
	case sc.Kind == errand.ScheduleEvent:
		fmt.Fprintf(w, "  on each %s\n", specCell(sc))
	case !sc.Enabled:
		fmt.Fprintf(w, "  none: disabled (errand schedule enable %s)\n", sc.Name)
	case len(runs) == 0:
		fmt.Fprintln(w, "  none")
	}
	if sc.Kind != errand.ScheduleEvent {
		layout := "Mon 2006-01-02 15:04 MST"
		if subMinute(runs) {
			layout = "Mon 2006-01-02 15:04:05 MST"
		}
		for _, t := range runs {
			fmt.Fprintf(w, "  %s\n", t.In(zone(sc)).Format(layout))
		}
	}
	return nil
}

// subMinute reports whether runs need seconds to tell apart: one falls
// off a minute, or two are less than a minute apart.
func subMinute(runs []time.Time) bool {
	for i, t := range runs {
		if t.Second() != 0 || (i > 0 && t.Sub(runs[i-1]) < time.Minute) {
			return true
		}
	}
	return false
}

func (a *app) newScheduleRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME|ID",
		Example: "  errand schedule rm digest",
		Aliases: []string{"remove", "delete"},
		Short:   "Remove a schedule (the tasks it made stay)",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.DeleteSchedule(cmd.Context(), args[0]); err != nil {
				return fmt.Errorf("rm %s: %w", args[0], err)
			}
			if a.asJSON {
				return printJSON(a.stdout, map[string]string{"removed": args[0]})
			}
			_, err = fmt.Fprintf(a.stdout, "removed %s\n", args[0])
			return err
		},
	}
}

func (a *app) newScheduleEnableCmd(action string, enabled bool) *cobra.Command {
	short := "Enable a schedule: its next run is computed from now"
	if !enabled {
		short = "Disable a schedule: it does not run until enabled"
	}
	return &cobra.Command{
		Use:     action + " NAME|ID",
		Example: "  errand schedule " + action + " digest",
		Short:   short,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			sc, err := c.SetScheduleEnabled(cmd.Context(), args[0], enabled)
			if err != nil {
				return fmt.Errorf("%s %s: %w", action, args[0], err)
			}
			if a.asJSON {
				return printJSON(a.stdout, sc)
			}
			_, err = fmt.Fprintf(a.stdout, "%s: %s\n", sc.Name, a.nextRunText(sc))
			return err
		},
	}
}

func (a *app) newScheduleRunCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "run NAME|ID",
		Example: "  errand schedule run digest",
		Short:   "Run a schedule now and print the task it made (its next run stays)",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			task, err := c.RunSchedule(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("run %s: %w", args[0], err)
			}
			if task == nil {
				return fmt.Errorf("run %s: the daemon answered without a task", args[0])
			}
			if a.asJSON {
				return printJSON(a.stdout, task)
			}
			_, err = fmt.Fprintln(a.stdout, task.ID)
			return err
		},
	}
}
