package engine

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/scheduler"
	"github.com/errandhq/errand/internal/validation"
	"github.com/errandhq/errand/store"
	"github.com/errandhq/errand/store/sqlitestore"
)

// FuzzParseDecision throws arbitrary scout outputs at the decision parser:
// it never panics, and what it accepts is one of the three decisions with
// what that decision needs.
func FuzzParseDecision(f *testing.F) {
	for _, s := range []string{
		`"all quiet"`, `null`, `{}`, `{"decision": "noop", "reason": "x"}`,
		`{"decision": "submit_task", "tasks": [{"goal": "x", "agent": "y"}]}`,
		`{"decision": "alert", "alert": "x"}`, `{"alerts": ["a", "b"]}`, `{"decision": "noop", "tasks": [{}]}`,
		`{"decision": "alert", "alerts": ["\u0000"]}`, `[1]`, `{"tasks": 5}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := parseDecision(b)
		if err != nil {
			return
		}
		switch d.Decision {
		case "noop":
			if len(d.Tasks) > 0 || len(d.Alerts) > 0 {
				t.Fatalf("noop with work: %+v", d)
			}
		case "submit_task":
			if len(d.Tasks) == 0 || len(d.Tasks) > maxScoutTasks {
				t.Fatalf("submit_task with %d tasks", len(d.Tasks))
			}
		case "alert":
			if len(d.Alerts) == 0 {
				t.Fatal("alert without a message")
			}
		default:
			t.Fatalf("decision %q accepted", d.Decision)
		}
		for _, a := range d.Alerts {
			if !utf8.ValidString(a) {
				t.Fatalf("alert %q is not UTF-8", a)
			}
		}
	})
}

// FuzzScheduleParams throws arbitrary schedules at validation: it never
// panics, refuses with a field named, and what it accepts stores, reads
// back and can say when it fires next.
func FuzzScheduleParams(f *testing.F) {
	for _, s := range [][4]string{
		{"cron", "*/5 * * * *", "Europe/Berlin", `{"goal": "x"}`},
		{"interval", "2s", "", `{"goal": "x", "result_route": {"type": "chain", "task": {"goal": "y"}}}`},
		{"event", `{"type": "task.failed", "match": {"agent": "a"}}`, "", `{"goal": "x"}`},
		{"heartbeat", "", "UTC", `{"prompt_file": "HEARTBEAT.md"}`},
		{"cron", "61 * * * *", "Mars/Base", `{"goal": ""}`},
		{"interval", "1h", "", `{"goal": "x", "concurrency_key": "repo:web", "result_route": {"type": "chain", "task": {"goal": "y", "concurrency_key": "a\u0007"}}}`},
		{"event", `{"type": "deploy.finished"}`, "", `{"goal": "x", "concurrency_key": 5, "debounce": {"key": "k", "period": "5s"}}`},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	b := setupFuzz(f)
	f.Fuzz(func(t *testing.T, kind, spec, zone, task string) {
		ctx := context.Background()
		sc, err := b.engine.Scheduler().Create(ctx, &scheduler.Params{Name: "fuzz", Kind: kind, Spec: spec, Timezone: zone, Task: json.RawMessage(task)})
		if err != nil {
			var v *validation.Error
			if !errors.As(err, &v) || v.Field == "" {
				t.Fatalf("refused without a field: %v", err)
			}
			return
		}
		defer func() {
			if err := b.engine.Scheduler().Delete(ctx, sc.ID); err != nil {
				t.Fatal(err)
			}
		}()
		got, err := b.engine.Scheduler().Get(ctx, sc.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Kind != store.ScheduleEvent && got.Enabled && got.NextRunAt.IsZero() {
			t.Fatalf("%s schedule %q has no next run", got.Kind, got.Spec)
		}
		// Fired by an event, or by hand: the task is made, or refused
		// (a prompt_file that is not there), never a panic.
		for _, ev := range []*store.Event{{ID: 1, Type: "x", Data: json.RawMessage(`{}`)}, nil} {
			if _, err := b.engine.Scheduler().TaskFor(ctx, got, ev, nil); err != nil {
				t.Logf("firing: %v", err)
			}
		}
	})
}

// setupFuzz opens one engine for every input of a fuzz target.
func setupFuzz(f *testing.F) *testBundle {
	f.Helper()
	st, err := sqlitestore.Open(context.Background(), filepath.Join(f.TempDir(), "errand.db"), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	fake := clock.NewFake(testStart)
	e, err := New(st, &Config{Clock: fake})
	if err != nil {
		f.Fatal(err)
	}
	return &testBundle{clock: fake, engine: e}
}
