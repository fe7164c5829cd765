package errand_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/errandhq/errand"
)

// Schedules travel through export and import with their history, and a
// template naming an agent nobody registered is refused at creation.
func TestSchedulesExportAndImport(t *testing.T) {
	ctx := context.Background()
	src, err := errand.Open(ctx, filepath.Join(t.TempDir(), "a.db"), &errand.Config{Agents: map[string]errand.Agent{
		"default": errand.AgentFunc(func(context.Context, *errand.TaskRun) (errand.Result, error) { return errand.Result{}, nil }),
	}})
	require.NoError(t, err)
	defer src.Close()

	_, err = src.CreateSchedule(ctx, &errand.ScheduleParams{Name: "r", Kind: "interval", Spec: "1h", Task: json.RawMessage(`{"goal": "x", "agent": "ghost"}`)})
	var v *errand.ValidationError
	require.ErrorAs(t, err, &v)
	require.Equal(t, "task.agent", v.Field)

	sc, err := src.CreateSchedule(ctx, &errand.ScheduleParams{Name: "report", Kind: "cron", Spec: "0 9 * * 1-5", Timezone: "Europe/Berlin",
		Task: json.RawMessage(`{"goal": "Morning report"}`)})
	require.NoError(t, err)
	task, err := src.RunSchedule(ctx, "report")
	require.NoError(t, err)
	require.Equal(t, "schedule:"+sc.ID, task.Options.Source)
	sc, err = src.Schedule(ctx, sc.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, sc.FireCount)
	require.Len(t, errand.NextRuns(sc, 5), 5)

	var out bytes.Buffer
	require.NoError(t, src.Export(ctx, &out, time.Time{}))
	dst, err := errand.Open(ctx, filepath.Join(t.TempDir(), "b.db"), nil)
	require.NoError(t, err)
	defer dst.Close()
	stats, err := dst.Import(ctx, &out)
	require.NoError(t, err)
	require.Equal(t, 1, stats.Schedules)
	got, err := dst.Schedule(ctx, "report")
	require.NoError(t, err)
	require.Equal(t, sc, got)
}
