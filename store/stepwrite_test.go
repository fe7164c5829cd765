package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCheckLease(t *testing.T) {
	t.Parallel()
	lease := Lease{TaskID: "tsk_1", Token: 3}
	for _, tc := range []struct {
		name   string
		status Status
		token  int64
		lease  Lease
		err    error
	}{
		{"Current", StatusRunning, 3, lease, nil},
		{"StaleToken", StatusRunning, 4, lease, ErrLeaseLost},
		{"NotRunning", StatusPending, 3, lease, ErrLeaseLost},
		{"TokenZero", StatusRunning, 0, Lease{TaskID: "tsk_1"}, ErrLeaseLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.err, CheckLease(tc.status, tc.token, tc.lease))
		})
	}
}

func TestStepStartReplays(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		step   Step
		replay bool
		err    string
	}{
		{"Done", Step{TaskID: "tsk_1", Status: StepDone}, true, ""},
		{"Denied", Step{TaskID: "tsk_1", Status: StepDenied}, true, ""},
		{"Failed", Step{TaskID: "tsk_1", Status: StepFailed}, false, ""},
		{"Running", Step{TaskID: "tsk_1", Status: StepRunning}, false, ""},
		{"OtherTask", Step{TaskID: "tsk_2", IdempotencyKey: "k", Status: StepDone}, false, "idempotency key k belongs to task tsk_2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			replay, err := StepStartReplays(&tc.step, "tsk_1")
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.replay, replay)
		})
	}
}

func TestCheckStepFinish(t *testing.T) {
	t.Parallel()
	for _, status := range []string{StepDone, StepFailed, StepDenied} {
		require.NoError(t, CheckStepFinish(&StepFinishParams{Status: status}), status)
	}
	require.EqualError(t, CheckStepFinish(&StepFinishParams{Status: StepRunning}), `status "running": want done, failed or denied`)
}

func TestStepEventData(t *testing.T) {
	t.Parallel()
	base := map[string]any{
		"step_no": 2, "call_index": 1, "type": StepToolCall, "status": StepDone, "idempotency_key": "k",
		"tokens_in": int64(10), "tokens_out": int64(20), "cost_usd": 0.5, "duration_ms": int64(7),
	}
	st := Step{StepNo: 2, CallIndex: 1, Type: StepToolCall, Status: StepDone, IdempotencyKey: "k",
		TokensIn: 10, TokensOut: 20, CostUSD: 0.5, DurationMS: 7, Input: []byte(`{"big":1}`), Output: []byte(`{"big":2}`)}
	require.Equal(t, base, StepEventData(&st), "no input, output, tool or error code")

	st.Tool, st.ErrorCode = "search", "timeout"
	want := map[string]any{"tool": "search", "error_code": "timeout"}
	for k, v := range base {
		want[k] = v
	}
	require.Equal(t, want, StepEventData(&st))
}

// fakeStepWriter records the calls StartStep and FinishStep make.
type fakeStepWriter struct {
	leaseErr   error
	byKey      []*Step // what each StepByKey returns, in turn; nil is ErrNotFound
	inserted   bool
	ended      *Step // nil: StepEnd finds no running step
	ofTask     *Step
	calls      []string
	eventTypes []string
}

func (f *fakeStepWriter) LeaseState(context.Context, string) (LeaseState, error) {
	f.calls = append(f.calls, "check")
	return fakeLeaseState(f.leaseErr != nil), nil
}

// fakeLeaseState is a task running under a lease of token 1, or, lost, a
// task that ended.
func fakeLeaseState(lost bool) LeaseState {
	if lost {
		return LeaseState{FinishLease: FinishLease{Status: StatusCompleted, Token: 1}}
	}
	return LeaseState{FinishLease: FinishLease{Status: StatusRunning, Token: 1}}
}

func (f *fakeStepWriter) StepByKey(context.Context, string) (*Step, error) {
	f.calls = append(f.calls, "byKey")
	st := f.byKey[0]
	f.byKey = f.byKey[1:]
	if st == nil {
		return nil, ErrNotFound
	}
	return st, nil
}

func (f *fakeStepWriter) StepInsert(_ context.Context, p *StepStartParams, _ time.Time) (*Step, bool, error) {
	f.calls = append(f.calls, "insert")
	if !f.inserted {
		return nil, false, nil
	}
	return &Step{TaskID: p.Lease.TaskID, Status: StepRunning}, true, nil
}

func (f *fakeStepWriter) StepRestart(_ context.Context, p *StepStartParams, _ time.Time) (*Step, error) {
	f.calls = append(f.calls, "restart")
	return &Step{TaskID: p.Lease.TaskID, Status: StepRunning}, nil
}

func (f *fakeStepWriter) StepEnd(context.Context, *StepFinishParams, time.Time) (*Step, error) {
	f.calls = append(f.calls, "end")
	if f.ended == nil {
		return nil, ErrNotFound
	}
	return f.ended, nil
}

func (f *fakeStepWriter) StepOfTask(context.Context, string, string) (*Step, error) {
	f.calls = append(f.calls, "ofTask")
	if f.ofTask == nil {
		return nil, ErrNotFound
	}
	return f.ofTask, nil
}

func (f *fakeStepWriter) StepSpend(context.Context, *StepFinishParams, *Step, time.Time) error {
	f.calls = append(f.calls, "spend")
	return nil
}

func (f *fakeStepWriter) AppendEvent(_ context.Context, _, typ, _ string, _ any, _ time.Time) error {
	f.eventTypes = append(f.eventTypes, typ)
	return nil
}

func (f *fakeStepWriter) SetAgentVersion(_ context.Context, _ string, version []byte, _ time.Time) error {
	f.calls = append(f.calls, "version "+string(version))
	return nil
}

func TestStartStep(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	p := &StepStartParams{Lease: Lease{TaskID: "tsk_1", Token: 1}, IdempotencyKey: "k"}
	done := &Step{TaskID: "tsk_1", IdempotencyKey: "k", Status: StepDone}
	failed := &Step{TaskID: "tsk_1", IdempotencyKey: "k", Status: StepFailed}
	for _, tc := range []struct {
		name    string
		w       fakeStepWriter
		want    *StepStartResult
		err     error
		calls   []string
		errText string
	}{
		{name: "LeaseLost", w: fakeStepWriter{leaseErr: ErrLeaseLost}, err: ErrLeaseLost, calls: []string{"check"}},
		{name: "New", w: fakeStepWriter{byKey: []*Step{nil}, inserted: true},
			want: &StepStartResult{Step: &Step{TaskID: "tsk_1", Status: StepRunning}}, calls: []string{"check", "byKey", "insert"}},
		{name: "WrittenMeanwhile", w: fakeStepWriter{byKey: []*Step{nil, done}},
			want: &StepStartResult{Step: done, Existed: true}, calls: []string{"check", "byKey", "insert", "byKey"}},
		{name: "DoneIsReplayed", w: fakeStepWriter{byKey: []*Step{done}},
			want: &StepStartResult{Step: done, Existed: true}, calls: []string{"check", "byKey"}},
		{name: "FailedRunsAgain", w: fakeStepWriter{byKey: []*Step{failed}},
			want: &StepStartResult{Step: &Step{TaskID: "tsk_1", Status: StepRunning}, Existed: true}, calls: []string{"check", "byKey", "restart"}},
		{name: "OtherTasksKey", w: fakeStepWriter{byKey: []*Step{{TaskID: "tsk_2", IdempotencyKey: "k"}}},
			errText: "idempotency key k belongs to task tsk_2", calls: []string{"check", "byKey"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := tc.w
			got, err := StartStep(context.Background(), &w, p, at)
			switch {
			case tc.errText != "":
				require.EqualError(t, err, tc.errText)
			case tc.err != nil:
				require.ErrorIs(t, err, tc.err)
			default:
				require.NoError(t, err)
			}
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.calls, w.calls)
		})
	}
}

func TestFinishStep(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	p := &StepFinishParams{Lease: Lease{TaskID: "tsk_1", Token: 1}, IdempotencyKey: "k", Status: StepDone}
	withVersion := *p
	withVersion.AgentVersion = &AgentVersion{Digest: "sha256:a"}
	ended := &Step{TaskID: "tsk_1", IdempotencyKey: "k", Status: StepDone}
	for _, tc := range []struct {
		name   string
		w      fakeStepWriter
		p      StepFinishParams
		want   *Step
		err    error
		calls  []string
		events []string
	}{
		{name: "LeaseLost", w: fakeStepWriter{leaseErr: ErrLeaseLost}, err: ErrLeaseLost, calls: []string{"check"}},
		{name: "Ends", w: fakeStepWriter{ended: ended}, want: ended,
			calls: []string{"check", "end", "spend"}, events: []string{EventTaskStep}},
		{name: "RecordsAgentVersion", w: fakeStepWriter{ended: ended}, p: withVersion, want: ended,
			calls: []string{"check", "end", "spend", `version {"digest":"sha256:a"}`}, events: []string{EventTaskStep}},
		{name: "EndedAlreadyCountsOnce", w: fakeStepWriter{ofTask: ended}, want: ended, calls: []string{"check", "end", "ofTask"}},
		{name: "NeverStarted", w: fakeStepWriter{}, err: ErrNotFound, calls: []string{"check", "end", "ofTask"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := tc.w
			fp := tc.p
			if fp.IdempotencyKey == "" {
				fp = *p
			}
			got, err := FinishStep(context.Background(), &w, &fp, at)
			if tc.err != nil {
				require.True(t, errors.Is(err, tc.err), "err %v", err)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.calls, w.calls)
			require.Equal(t, tc.events, w.eventTypes)
		})
	}
}
