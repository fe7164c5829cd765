package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeInputWriter holds requests and task states and records the writes
// AnswerInput and ExpireInputs make.
type fakeInputWriter struct {
	request *InputRequest // what InputToAnswer finds; nil is ErrNotFound
	due     []DueInput
	status  map[string]Status
	writes  []string
	events  []string
}

func (f *fakeInputWriter) InputToAnswer(context.Context, string, string) (*InputRequest, error) {
	if f.request == nil {
		return nil, ErrNotFound
	}
	return f.request, nil
}

func (f *fakeInputWriter) InputsDue(context.Context, time.Time) ([]DueInput, error) {
	return f.due, nil
}

func (f *fakeInputWriter) LeaseState(_ context.Context, taskID string) (LeaseState, error) {
	st, ok := f.status[taskID]
	if !ok {
		return LeaseState{}, ErrNotFound
	}
	return LeaseState{FinishLease: FinishLease{Status: st}, Attempt: 2}, nil
}

func (f *fakeInputWriter) InputAnswered(_ context.Context, requestID, taskID, answer string, _ time.Time) error {
	f.writes = append(f.writes, "answered "+requestID+" "+taskID+" "+answer)
	return nil
}

func (f *fakeInputWriter) InputExpired(_ context.Context, requestID string) error {
	f.writes = append(f.writes, "expired "+requestID)
	return nil
}

func (f *fakeInputWriter) InputTaskFailed(_ context.Context, taskID string, e *TaskError, _ time.Time) error {
	f.writes = append(f.writes, "failed "+taskID+" "+e.Code+": "+e.Message)
	return nil
}

func (f *fakeInputWriter) AppendEvent(_ context.Context, taskID, typ, actor string, _ any, _ time.Time) error {
	f.events = append(f.events, taskID+" "+typ+" "+actor)
	return nil
}

func (f *fakeInputWriter) TaskEnded(_ context.Context, taskID string, _ time.Time) error {
	f.writes = append(f.writes, "ended "+taskID)
	return nil
}

func TestAnswerInput(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	pending := func() *InputRequest {
		return &InputRequest{ID: "inp_1", TaskID: "tsk_1", Question: "which?", Status: InputPending}
	}
	for _, tc := range []struct {
		name    string
		p       InputAnswerParams
		request *InputRequest
		status  Status
		err     error
		errText string
		writes  []string
		events  []string
	}{
		{name: "Answers", p: InputAnswerParams{RequestID: "inp_1", Answer: "this", Actor: "user"}, request: pending(), status: StatusInputRequired,
			writes: []string{"answered inp_1 tsk_1 this"}, events: []string{"tsk_1 task.input_answered user"}},
		{name: "ByTask", p: InputAnswerParams{TaskID: "tsk_1", Answer: "this", Actor: "user"}, request: pending(), status: StatusInputRequired,
			writes: []string{"answered inp_1 tsk_1 this"}, events: []string{"tsk_1 task.input_answered user"}},
		{name: "Unknown", p: InputAnswerParams{RequestID: "inp_9"}, err: ErrNotFound},
		{name: "OtherTasksRequest", p: InputAnswerParams{RequestID: "inp_1", TaskID: "tsk_2"}, request: pending(), status: StatusInputRequired, err: ErrNotFound},
		{name: "Closed", p: InputAnswerParams{RequestID: "inp_1"}, request: &InputRequest{ID: "inp_1", TaskID: "tsk_1", Status: InputAnswered},
			status: StatusInputRequired, err: ErrInputClosed, errText: "request inp_1 is answered: errand: input request is not pending"},
		{name: "TaskNoLongerWaits", p: InputAnswerParams{RequestID: "inp_1"}, request: pending(), status: StatusPaused, err: ErrIllegalTransition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeInputWriter{request: tc.request, status: map[string]Status{"tsk_1": tc.status}}
			got, err := AnswerInput(context.Background(), f, &tc.p, at)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				if tc.errText != "" {
					require.EqualError(t, err, tc.errText)
				}
				require.Nil(t, got)
			} else {
				require.NoError(t, err)
				require.Equal(t, &InputRequest{ID: "inp_1", TaskID: "tsk_1", Question: "which?", Status: InputAnswered, Answer: tc.p.Answer, AnsweredAt: at}, got)
			}
			require.Equal(t, tc.writes, f.writes)
			require.Equal(t, tc.events, f.events)
		})
	}
}

func TestExpireInputs(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	def := "the default"
	f := &fakeInputWriter{
		due: []DueInput{
			{ID: "inp_1", TaskID: "tsk_1", Question: "which?", DefaultAnswer: &def},
			{ID: "inp_2", TaskID: "tsk_2", Question: "when?"},
			{ID: "inp_3", TaskID: "tsk_3", Question: "paused meanwhile"},
		},
		status: map[string]Status{"tsk_1": StatusInputRequired, "tsk_2": StatusInputRequired, "tsk_3": StatusPaused},
	}
	n, err := ExpireInputs(context.Background(), f, at)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the paused task's request stays as it is")
	require.Equal(t, []string{
		"answered inp_1 tsk_1 the default",
		"expired inp_2", "failed tsk_2 input_timeout: nobody answered: when?", "ended tsk_2",
	}, f.writes)
	require.Equal(t, []string{"tsk_1 task.input_answered system", "tsk_2 task.failed system"}, f.events)

	_, err = ExpireInputs(context.Background(), &fakeInputWriter{due: []DueInput{{ID: "inp_1", TaskID: "tsk_gone"}}}, at)
	require.True(t, errors.Is(err, ErrNotFound))
}
