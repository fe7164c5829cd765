package config

import (
	"cmp"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/errandhq/errand/internal/api"
)

func TestSchedules(t *testing.T) {
	t.Parallel()

	cfg, err := Parse([]byte(`
schedules:
  nightly:
    kind: cron
    spec: "0 3 * * *"
    timezone: Europe/Berlin
    catch_up: none
    enabled: false
    task:
      goal: "42"
      agent: shell
      priority: 3
      tags: [ops, 7]
      input: {n: 1, f: 0.5, on: true, none: ~, list: [a, {b: c}], day: 2024-01-02}
      budget: {max_tokens: 1000, max_wall_clock: 5m}
      result_route: notify
      concurrency_key: repo:ops
  on-failure:
    kind: event
    spec: {type: task.failed, match: {agent: shell}}
    task: {goal: look into it}
  raw-event:
    kind: event
    spec: '{"type": "deploy.finished"}'
    task: {goal: check the deploy}
  scout:
    kind: heartbeat
    stuck_after: 45m
    task: {prompt_file: HEARTBEAT.md}
`))
	require.NoError(t, err)
	require.Equal(t, []string{"nightly", "on-failure", "raw-event", "scout"}, cfg.ScheduleNames())

	require.Equal(t, Schedule{
		Kind: "cron", Spec: "0 3 * * *", Timezone: "Europe/Berlin", CatchUp: "none", Enabled: false,
		Task: TaskTemplate(`{"agent":"shell","budget":{"max_tokens":1000,"max_wall_clock":"5m0s"},"concurrency_key":"repo:ops","goal":"42",` +
			`"input":{"day":"2024-01-02","f":0.5,"list":["a",{"b":"c"}],"n":1,"none":null,"on":true},` +
			`"priority":3,"result_route":"notify","tags":["ops","7"]}`),
	}, cfg.Schedules["nightly"], "strings stay strings, numbers numbers; keys sorted")
	require.Equal(t, Schedule{
		Kind: "event", Spec: `{"match":{"agent":"shell"},"type":"task.failed"}`, Enabled: true,
		Task: TaskTemplate(`{"goal":"look into it"}`),
	}, cfg.Schedules["on-failure"], "enabled by default; an event spec mapping becomes its JSON")
	require.Equal(t, ScheduleSpec(`{"type": "deploy.finished"}`), cfg.Schedules["raw-event"].Spec)
	require.Equal(t, Schedule{
		Kind: "heartbeat", Enabled: true, StuckAfter: Duration(45 * time.Minute),
		Task: TaskTemplate(`{"prompt_file":"HEARTBEAT.md"}`),
	}, cfg.Schedules["scout"], "a heartbeat's spec may be empty (10m)")

	// What the file holds, the re-encoded file holds too.
	out, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	again, err := Parse(out)
	require.NoError(t, err, string(out))
	require.Equal(t, cfg, again, string(out))
}

func TestScheduleAliasesAndMerges(t *testing.T) {
	t.Parallel()

	cfg, err := Parse([]byte(`
schedules:
  a:
    kind: interval
    spec: 1h
    task: &task {goal: base, agent: shell, input: &in {x: 1, y: 2}}
  b:
    kind: interval
    spec: 2h
    task:
      <<: *task
      goal: override
      input: {<<: *in, y: 3}
  c:
    kind: interval
    spec: 3h
    task: {<<: [{goal: first}, {goal: second, title: t}]}
`))
	require.NoError(t, err)
	require.JSONEq(t, `{"goal":"base","agent":"shell","input":{"x":1,"y":2}}`, string(cfg.Schedules["a"].Task))
	require.JSONEq(t, `{"goal":"override","agent":"shell","input":{"x":1,"y":3}}`, string(cfg.Schedules["b"].Task))
	require.JSONEq(t, `{"goal":"first","title":"t"}`, string(cfg.Schedules["c"].Task))
}

func TestScheduleErrors(t *testing.T) {
	t.Parallel()

	const task = "task: {goal: g}"
	tests := []struct {
		name string
		yaml string
		want string // the whole error
	}{
		{"KindMissing", "schedules: {s: {spec: 1h, " + task + "}}", "schedules.s.kind: required: cron, interval, event or heartbeat"},
		{"KindBad", "schedules: {s: {kind: hourly, spec: 1h, " + task + "}}", `schedules.s.kind: "hourly" is not cron, interval, event or heartbeat`},
		{"UnknownKey", "schedules:\n  s:\n    kind: interval\n    spec: 1h\n    timezon: UTC\n    " + task + "\n", "schedules.s.timezon: unknown key (did you mean timezone?) (line 5)"},
		{"UnknownTaskKey", "schedules:\n  s:\n    kind: interval\n    spec: 1h\n    task:\n      goal: g\n      agnet: a\n", "schedules.s.task.agnet: unknown key (did you mean agent?) (line 7)"},
		{"UnknownTaskBudgetKey", "schedules: {s: {kind: interval, spec: 1h, task: {goal: g, budget: {max_cost_us: 1}}}}", "schedules.s.task.budget.max_cost_us: unknown key (did you mean max_cost_usd?) (line 1)"},
		{"UnknownEventSpecKey", "schedules: {s: {kind: event, spec: {type: a, matches: {}}, " + task + "}}", "schedules.s.spec.matches: unknown key (did you mean match?) (line 1)"},
		{"TaskType", "schedules: {s: {kind: interval, spec: 1h, task: {goal: g, priority: high}}}", `schedules.s.task.priority: "high" is not an integer (line 1)`},
		{"TaskConcurrencyKeyType", "schedules: {s: {kind: interval, spec: 1h, task: {goal: g, concurrency_key: [a]}}}", "schedules.s.task.concurrency_key: must be a string (line 1)"},
		{"TaskInfinity", "schedules: {s: {kind: interval, spec: 1h, task: {goal: g, input: {x: .inf}}}}", `schedules.s.task.input.x: ".inf" is not a number JSON can hold (line 1)`},
		{"TaskCostInfinity", "schedules: {s: {kind: interval, spec: 1h, task: {goal: g, budget: {max_cost_usd: .nan}}}}", "schedules.s.task.budget.max_cost_usd: must be a finite number (line 1)"},
		{"TaskScalar", "schedules: {s: {kind: interval, spec: 1h, task: do it}}", "schedules.s.task: must be a mapping (line 1)"},
		{"TaskMissing", "schedules: {s: {kind: interval, spec: 1h}}", "schedules.s.task: required: the POST /api/tasks body of the tasks the schedule makes"},
		{"GoalMissing", "schedules: {s: {kind: interval, spec: 1h, task: {agent: a}}}", "schedules.s.task.goal: required"},
		{"HeartbeatGoalMissing", "schedules: {s: {kind: heartbeat, task: {agent: a}}}", "schedules.s.task.goal: required, or prompt_file"},
		{"PromptFileNotHeartbeat", "schedules: {s: {kind: interval, spec: 1h, task: {prompt_file: p}}}", "schedules.s.task.prompt_file: only for kind heartbeat, which reads its goal from the file at each firing"},
		{"TemplateKeys", "schedules: {s: {kind: interval, spec: 1h, task: {goal: g, parent_id: p, depends_on: [d], run_at: 2030-01-01T00:00:00Z, idempotency_key: k}}}",
			"schedules.s.task.parent_id: a schedule makes top-level tasks\nschedules.s.task.depends_on: a schedule's tasks cannot depend on tasks\n" +
				"schedules.s.task.run_at: a schedule's tasks run when they are made\nschedules.s.task.idempotency_key: would make every firing the same task"},
		{"SpecCron", "schedules: {s: {kind: cron, spec: '61 * * * *', " + task + "}}", "schedules.s.spec: "},
		{"SpecInterval", "schedules: {s: {kind: interval, spec: 10, " + task + "}}", `schedules.s.spec: "10" is not a Go duration such as 30s or 1h`},
		{"SpecMissing", "schedules: {s: {kind: interval, " + task + "}}", "schedules.s.spec: required: a Go duration such as 30s or 1h"},
		{"SpecMappingNotEvent", "schedules: {s: {kind: cron, spec: {type: a}, " + task + "}}", "schedules.s.spec: a mapping {type, match} is only for kind event"},
		{"SpecList", "schedules: {s: {kind: cron, spec: [a], " + task + "}}", "schedules.s.spec: must be a string, or for kind event a mapping {type, match} (line 1)"},
		{"EventSpecMissing", "schedules: {s: {kind: event, " + task + "}}", "schedules.s.spec: required for kind event: a mapping {type, match}"},
		{"EventSpecText", "schedules: {s: {kind: event, spec: task.failed, " + task + "}}", "schedules.s.spec: must be a mapping {type, match} (or its JSON)"},
		{"EventType", "schedules: {s: {kind: event, spec: {match: {a: b}}, " + task + "}}", "schedules.s.spec.type: required: an event type such as task.failed or deploy.finished"},
		{"Timezone", "schedules: {s: {kind: cron, spec: '@daily', timezone: Mars/Olympus, " + task + "}}", `schedules.s.timezone: "Mars/Olympus" is not an IANA time zone such as Europe/Berlin`},
		{"ActiveHoursNotHeartbeat", "schedules: {s: {kind: interval, spec: 1h, active_hours: '08:00-18:00', " + task + "}}", "schedules.s.active_hours: only a heartbeat schedule takes active hours"},
		{"CatchUp", "schedules: {s: {kind: interval, spec: 1h, catch_up: all, " + task + "}}", `schedules.s.catch_up: "all" is not one or none`},
		{"Overlap", "schedules: {s: {kind: interval, spec: 1h, overlap: queue, " + task + "}}", `schedules.s.overlap: "queue" is not skip, buffer_one, allow_all or cancel_previous`},
		{"OverlapCase", "schedules: {s: {kind: cron, spec: '@hourly', overlap: Skip, " + task + "}}", `schedules.s.overlap: "Skip" is not skip, buffer_one, allow_all or cancel_previous`},
		{"OverlapEvent", "schedules: {s: {kind: event, spec: {type: a}, overlap: all, " + task + "}}", `schedules.s.overlap: "all" is not skip, buffer_one, allow_all or cancel_previous`},
		{"OverlapHeartbeat", "schedules: {s: {kind: heartbeat, overlap: 'skip ', " + task + "}}", `schedules.s.overlap: "skip " is not skip, buffer_one, allow_all or cancel_previous`},
		{"OverlapList", "schedules: {s: {kind: interval, spec: 1h, overlap: [skip], " + task + "}}", "schedules.s.overlap: must be a string (line 1)"},
		{"CronNever30February", "schedules: {s: {kind: cron, spec: '0 0 30 2 *', " + task + "}}",
			`schedules.s.spec: cron expression "0 0 30 2 *" never fires: no day of its months matches it (such as 30 February)`},
		{"CronNever31stOfShortMonths", "schedules: {s: {kind: cron, spec: '0 0 31 4,6,9,11 *', " + task + "}}",
			`schedules.s.spec: cron expression "0 0 31 4,6,9,11 *" never fires: no day of its months matches it (such as 30 February)`},
		{"CronNeverWithZone", "schedules: {s: {kind: cron, spec: '15 8 31 feb *', timezone: Europe/Berlin, overlap: buffer_one, " + task + "}}",
			`schedules.s.spec: cron expression "15 8 31 feb *" never fires: no day of its months matches it (such as 30 February)`},
		{"StuckAfter", "schedules: {s: {kind: interval, spec: 1h, stuck_after: 5m, " + task + "}}", "schedules.s.stuck_after: only for kind heartbeat"},
		{"EscalateToUnknown", "schedules: {s: {kind: heartbeat, escalate_to: oncall, " + task + "}}", `schedules.s.escalate_to: "oncall" is not an agent in agents`},
		{"EscalationsNegative", "agents: {oncall: {kind: exec, command: [x]}}\nschedules: {s: {kind: heartbeat, escalate_to: oncall, max_escalations_per_day: -1, " + task + "}}",
			"schedules.s.max_escalations_per_day: must not be negative (0 forbids escalations)"},
		{"EscalationsWithoutAgent", "schedules: {s: {kind: heartbeat, max_escalations_per_day: 2, " + task + "}}",
			"schedules.s.escalate_to: is required with max_escalations_per_day or escalation_budget: the agent escalations go to"},
		{"EscalateToNotHeartbeat", "agents: {oncall: {kind: exec, command: [x]}}\nschedules: {s: {kind: interval, spec: 1h, escalate_to: oncall, " + task + "}}",
			"schedules.s.escalate_to: only for kind heartbeat"},
		{"EscalationBudgetNegative", "agents: {oncall: {kind: exec, command: [x]}}\nschedules: {s: {kind: heartbeat, escalate_to: oncall, escalation_budget: {max_tool_calls: -1}, " + task + "}}",
			"schedules.s.escalation_budget.max_tool_calls: must not be negative"},
		{"Enabled", "schedules: {s: {kind: interval, spec: 1h, enabled: sometimes, " + task + "}}", `schedules.s.enabled: "sometimes" is not true or false (line 1)`},
		{"Name", "schedules: {'nightly run': {kind: interval, spec: 1h, " + task + "}}", `schedules: "nightly run" is not a valid schedule name: use up to 100 letters, digits, '.', '_' and '-', not starting with sch_`},
		{"NameLikeID", "schedules: {sch_1: {kind: interval, spec: 1h, " + task + "}}", `schedules: "sch_1" is not a valid schedule name: use up to 100 letters, digits, '.', '_' and '-', not starting with sch_`},
		{"Duplicate", "schedules:\n  s: {kind: interval, spec: 1h, " + task + "}\n  s: {kind: interval, spec: 2h, " + task + "}\n", "schedules.s: set twice (first at line 2) (line 3)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse([]byte(tt.yaml))
			require.Error(t, err)
			require.Nil(t, cfg)
			if strings.HasSuffix(tt.want, ": ") {
				require.ErrorContains(t, err, tt.want)
			} else {
				require.EqualError(t, err, tt.want)
			}
			for _, fe := range FieldErrors(err) {
				require.NotEmpty(t, fe.Path)
			}
		})
	}
}

// Every overlap value is accepted on every kind and kept as written; an
// empty one is left for the engine's default (skip, or allow_all for
// kind event). Cron expressions that fire only some years, or only in
// some months, are accepted: only one that can never fire is refused.
func TestScheduleOverlapAndRareCron(t *testing.T) {
	t.Parallel()

	kinds := map[string]string{
		ScheduleCron:      "kind: cron, spec: '*/5 * * * *'",
		ScheduleInterval:  "kind: interval, spec: 1s",
		ScheduleEvent:     "kind: event, spec: {type: deploy.finished}",
		ScheduleHeartbeat: "kind: heartbeat",
	}
	for kind, head := range kinds {
		for _, overlap := range []string{"skip", "buffer_one", "allow_all", "cancel_previous", ""} {
			t.Run(kind+"/"+cmp.Or(overlap, "default"), func(t *testing.T) {
				t.Parallel()
				cfg, err := Parse([]byte("schedules: {s: {" + head + ", overlap: '" + overlap + "', task: {goal: g}}}"))
				require.NoError(t, err)
				require.Equal(t, overlap, cfg.Schedules["s"].Overlap)
				require.Equal(t, kind, cfg.Schedules["s"].Kind)
			})
		}
	}
	for _, spec := range []string{"0 0 29 2 *", "0 0 31 * *", "0 0 30 1,2 *", "0 0 31 4,6,9,11,12 *", "0 12 L 2 *"} {
		t.Run("cron "+spec, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse([]byte("schedules: {s: {kind: cron, spec: '" + spec + "', task: {goal: g}}}"))
			require.NoError(t, err)
			require.Equal(t, ScheduleSpec(spec), cfg.Schedules["s"].Spec)
		})
	}
}

// TestTaskShapeMatchesAPI keeps the keys a schedule's task may have in
// step with the body of POST /api/tasks.
func TestTaskShapeMatchesAPI(t *testing.T) {
	t.Parallel()

	keys := func(typ reflect.Type, tag string) []string {
		var out []string
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get(tag), ",")
			out = append(out, name)
		}
		slices.Sort(out)
		return out
	}
	want := append(keys(reflect.TypeFor[api.CreateTask](), "json"), "prompt_file")
	slices.Sort(want)
	require.Equal(t, want, keys(taskShapeType, "yaml"))
	require.Equal(t, keys(reflect.TypeFor[TaskBudget](), "yaml"), keys(reflect.TypeFor[budgetShape](), "yaml"))
}

func TestTaskTemplateJSON(t *testing.T) {
	t.Parallel()

	var s struct {
		Task TaskTemplate `json:"task"`
	}
	require.NoError(t, json.Unmarshal([]byte(`{"task": {"goal": "g",  "priority": 1}}`), &s))
	require.Equal(t, TaskTemplate(`{"goal":"g","priority":1}`), s.Task)
	out, err := json.Marshal(s)
	require.NoError(t, err)
	require.JSONEq(t, `{"task":{"goal":"g","priority":1}}`, string(out))

	require.NoError(t, json.Unmarshal([]byte(`{"task": null}`), &s))
	require.Nil(t, s.Task)
	out, err = json.Marshal(s)
	require.NoError(t, err)
	require.JSONEq(t, `{"task":null}`, string(out))
}

// A few lines of aliases must not expand to a template of gigabytes.
func TestScheduleTaskAliasBomb(t *testing.T) {
	t.Parallel()

	doc := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for _, name := range []string{"b", "c", "d", "e", "f", "g"} {
		doc += name + ": &" + name + " [" + strings.Repeat("*"+prev+", ", 9) + "*" + prev + "]\n"
		prev = name
	}
	// The anchors sit under input, so the checker sees them once each.
	doc = "schedules:\n  s:\n    kind: interval\n    spec: 1h\n    task:\n      goal: g\n      input:\n" + indent(doc, "        ")
	_, err := Parse([]byte(doc))
	require.ErrorContains(t, err, "schedules.s.task: holds more than 100000 values once aliases are expanded")
}

func indent(s, prefix string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString(prefix + line)
	}
	return b.String()
}

// A heartbeat's escalation settings read as written, and survive a
// round trip through YAML.
func TestScheduleEscalation(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(`
agents: {oncall: {kind: exec, command: [x]}}
schedules:
  scout:
    kind: heartbeat
    escalate_to: oncall
    max_escalations_per_day: 0
    escalation_budget: {max_cost_usd: 0.5, max_wall_clock: 10m}
    task: {prompt_file: HEARTBEAT.md}
`))
	require.NoError(t, err)
	zero := 0
	require.Equal(t, Schedule{
		Kind: "heartbeat", Enabled: true, EscalateTo: "oncall", MaxEscalationsPerDay: &zero,
		EscalationBudget: &TaskBudget{MaxCostUSD: 0.5, MaxWallClock: Duration(10 * time.Minute)},
		Task:             TaskTemplate(`{"prompt_file":"HEARTBEAT.md"}`),
	}, cfg.Schedules["scout"])
	out, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	again, err := Parse(out)
	require.NoError(t, err, string(out))
	require.Equal(t, cfg, again, string(out))
}
