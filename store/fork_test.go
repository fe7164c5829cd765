package store

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestForkableStep(t *testing.T) {
	t.Parallel()
	st := func(n, call int, status string) *Step { return &Step{StepNo: n, CallIndex: call, Status: status} }
	for _, tc := range []struct {
		name    string
		steps   []*Step
		want    int
		running bool
	}{
		{"no steps", nil, 1, false},
		{"all done", []*Step{st(1, 0, StepDone), st(1, 1, StepDenied), st(2, 0, StepDone)}, 3, false},
		{"running last", []*Step{st(1, 0, StepDone), st(2, 0, StepRunning)}, 2, false},
		{"a failed call in a step", []*Step{st(1, 0, StepDone), st(2, 0, StepDone), st(2, 1, StepFailed), st(3, 0, StepDone)}, 2, false},
		{"failed first", []*Step{st(1, 0, StepFailed)}, 1, false},
		{"a gap", []*Step{st(1, 0, StepDone), st(3, 0, StepDone), st(4, 0, StepRunning)}, 4, false},
		{"running, in a step", []*Step{st(1, 0, StepDone), st(2, 0, StepRunning)}, 2, true},
		{"running, maybe mid-step", []*Step{st(1, 0, StepDone), st(2, 0, StepDone)}, 2, true},
		{"running, no step yet", nil, 1, true},
	} {
		require.Equal(t, tc.want, ForkableStep(ForkSource{Running: tc.running, Steps: tc.steps}), tc.name)
	}
}

func TestPlanForkAnswers(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := []*Step{
		{TaskID: "src", StepNo: 1, Status: StepDone, CreatedAt: at},
		{TaskID: "src", StepNo: 2, Status: StepDone, CreatedAt: at.Add(2 * time.Second)},
		{TaskID: "src", StepNo: 3, Status: StepDone, CreatedAt: at.Add(4 * time.Second)},
	}
	inputs := []*InputRequest{
		{ID: "a", Question: "one?", Status: InputAnswered, Answer: "1", CreatedAt: at.Add(time.Second)},
		{ID: "b", Question: "two?", Status: InputAnswered, Answer: "2", CreatedAt: at.Add(3 * time.Second)},
	}
	ids := 0
	p := &TaskForkParams{SourceID: "src", StepKeyFunc: func(id string, n, c int) string { return fmt.Sprint(id, n, c) },
		InputIDFunc: func() string { ids++; return fmt.Sprint("new", ids) }}
	answer := "changed"
	for _, tc := range []struct {
		from    int
		answer  *string
		answers []string
	}{
		{1, nil, nil},
		{2, nil, []string{"1"}},
		{2, &answer, []string{"changed"}},
		{3, &answer, []string{"1", "changed"}},
		{4, nil, []string{"1", "2"}},
	} {
		p.FromStep, p.Answer = tc.from, tc.answer
		plan, err := PlanFork(p, "fork", ForkSource{Steps: steps, Inputs: inputs}, at.Add(time.Hour))
		require.NoError(t, err, "from %d", tc.from)
		var got []string
		for _, in := range plan.Inputs {
			require.Equal(t, "fork", in.TaskID)
			got = append(got, in.Answer)
		}
		require.Equal(t, tc.answers, got, "from %d", tc.from)
		require.Equal(t, tc.from-1, plan.CopiedSteps)
	}
	require.Equal(t, "a", inputs[0].ID, "the source's rows are not changed")
	p.FromStep, p.Answer = 1, &answer
	_, err := PlanFork(p, "fork", ForkSource{Steps: steps, Inputs: inputs}, at)
	var fe *ForkError
	require.True(t, errors.As(err, &fe))
	require.Equal(t, "answer", fe.Field)
}

// FuzzPlanFork: any from_step and answer is either refused with a
// *ForkError naming the field or copies exactly the steps before it.
func FuzzPlanFork(f *testing.F) {
	f.Add(3, "yes", true)
	f.Add(0, "", false)
	f.Add(-7, "x", true)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := []*Step{
		{TaskID: "src", StepNo: 1, Status: StepDone, CreatedAt: at},
		{TaskID: "src", StepNo: 1, CallIndex: 1, Status: StepDone, CreatedAt: at},
		{TaskID: "src", StepNo: 2, Status: StepDone, CreatedAt: at.Add(2 * time.Second)},
		{TaskID: "src", StepNo: 3, Status: StepRunning, CreatedAt: at.Add(4 * time.Second)},
	}
	inputs := []*InputRequest{{ID: "a", Question: "q?", Status: InputAnswered, Answer: "1", CreatedAt: at.Add(time.Second)}}
	f.Fuzz(func(t *testing.T, from int, answer string, withAnswer bool) {
		p := &TaskForkParams{SourceID: "src", FromStep: from,
			StepKeyFunc: func(id string, n, c int) string { return fmt.Sprint(id, n, c) },
			InputIDFunc: func() string { return "new" }}
		if withAnswer {
			p.Answer = &answer
		}
		plan, err := PlanFork(p, "fork", ForkSource{Steps: steps, Inputs: inputs}, at)
		if err != nil {
			var fe *ForkError
			if !errors.As(err, &fe) || (fe.Field != "from_step" && fe.Field != "answer") {
				t.Fatalf("from %d: %v", from, err)
			}
			return
		}
		for _, st := range plan.Steps {
			if st.StepNo >= from || st.TaskID != "fork" || st.CopiedFrom != "src" {
				t.Fatalf("from %d: copied %+v", from, st)
			}
		}
	})
}
