package store

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckImportRows(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want string // "" for accepted
	}{
		{"Task", CheckImportTask(&TaskRecord{Task: &Task{ID: "tsk_1", Status: StatusPending}}), ""},
		{"TaskNil", CheckImportTask(nil), "task: an id is required"},
		{"TaskNoTask", CheckImportTask(&TaskRecord{}), "task: an id is required"},
		{"TaskNoID", CheckImportTask(&TaskRecord{Task: &Task{Status: StatusPending}}), "task: an id is required"},
		{"TaskUnknownStatus", CheckImportTask(&TaskRecord{Task: &Task{ID: "tsk_1", Status: "lost"}}), `task tsk_1: unknown status "lost"`},
		{"Step", CheckImportStep(&Step{TaskID: "tsk_1", IdempotencyKey: "k"}), ""},
		{"StepNoKey", CheckImportStep(&Step{TaskID: "tsk_1"}), "step: task_id and idempotency_key are required"},
		{"StepNil", CheckImportStep(nil), "step: task_id and idempotency_key are required"},
		{"Input", CheckImportInput(&InputRecord{InputRequest: &InputRequest{ID: "inp_1", TaskID: "tsk_1"}}), ""},
		{"InputNoRequest", CheckImportInput(&InputRecord{}), "input request: id and task_id are required"},
		{"InputNoTask", CheckImportInput(&InputRecord{InputRequest: &InputRequest{ID: "inp_1"}}), "input request: id and task_id are required"},
		{"Dependency", CheckImportDependency(&Dependency{TaskID: "a", DependsOnID: "b"}), ""},
		{"DependencyOneEnd", CheckImportDependency(&Dependency{TaskID: "a"}), "dependency: task_id and depends_on are required"},
		{"EventWithoutTask", CheckImportEvent(&Event{ID: 1, Type: "ext.thing"}), ""},
		{"EventIDZero", CheckImportEvent(&Event{Type: "ext.thing"}), "event: a positive id and a type are required"},
		{"EventNoType", CheckImportEvent(&Event{ID: 1}), "event: a positive id and a type are required"},
		{"Schedule", CheckImportSchedule(&Schedule{ID: "sch_1", Name: "n", Kind: ScheduleCron}), ""},
		{"ScheduleNoKind", CheckImportSchedule(&Schedule{ID: "sch_1", Name: "n"}), "schedule: id, name and kind are required"},
		{"Memory", CheckImportMemory(&Memory{ID: "mem_1", Text: "t", Source: "user"}), ""},
		{"MemoryNoSource", CheckImportMemory(&Memory{ID: "mem_1", Text: "t"}), "memory: id, text and source are required"},
		{"Notification", CheckImportNotification(&Notification{ID: 1, TaskID: "tsk_1"}), ""},
		{"NotificationNoTask", CheckImportNotification(&Notification{ID: 1}), "notification: a positive id and task_id are required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.want == "" {
				require.NoError(t, tc.err)
				return
			}
			require.EqualError(t, tc.err, tc.want)
		})
	}
}

func TestImportedDefaults(t *testing.T) {
	t.Parallel()
	require.Equal(t, DependencyBlocks, ImportedDependencyKind(&Dependency{}))
	require.Equal(t, "related", ImportedDependencyKind(&Dependency{Kind: "related"}))
	require.Equal(t, OnDependencyFailureFail, ImportedDependencyPolicy(&TaskRecord{Task: &Task{}}))
	require.Equal(t, "run", ImportedDependencyPolicy(&TaskRecord{Task: &Task{}, OnDependencyFailure: "run"}))
}

func TestEncodeTaskJSON(t *testing.T) {
	t.Parallel()
	j, err := EncodeTaskJSON(&Task{ID: "tsk_1"})
	require.NoError(t, err)
	require.Equal(t, TaskJSON{}, j, "absent columns are NULL")

	j, err = EncodeTaskJSON(&Task{ID: "tsk_1", Budget: &Budget{MaxToolCalls: 3}, Consumed: &Consumed{Tokens: 5}})
	require.NoError(t, err)
	var b Budget
	require.NoError(t, json.Unmarshal(j.Budget, &b))
	require.Equal(t, Budget{MaxToolCalls: 3}, b)
	require.NotNil(t, j.Consumed)
	require.Nil(t, j.Progress)
	require.Nil(t, j.Options)
}
