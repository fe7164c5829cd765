package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestChangedParts(t *testing.T) {
	t.Parallel()
	a := &AgentVersion{Digest: "sha256:a", Parts: map[string]string{"kind": "1", "model": "2", "system_prompt": "3"}}
	for _, tc := range []struct {
		name string
		old  *AgentVersion
		cur  *AgentVersion
		want []string
	}{
		{"Same", a, a, nil},
		{"OnePart", a, &AgentVersion{Digest: "sha256:b", Parts: map[string]string{"kind": "1", "model": "2", "system_prompt": "4"}},
			[]string{"system_prompt"}},
		{"AddedAndRemoved", a, &AgentVersion{Digest: "sha256:c", Parts: map[string]string{"kind": "1", "model": "9", "tools": "5"}},
			[]string{"model", "system_prompt", "tools"}},
		{"NoneBefore", nil, &AgentVersion{Digest: "sha256:d", Parts: map[string]string{"kind": "1"}}, []string{"kind"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, ChangedParts(tc.old, tc.cur))
		})
	}
}

func TestAgentVersionSame(t *testing.T) {
	t.Parallel()
	a, b := &AgentVersion{Digest: "sha256:a"}, &AgentVersion{Digest: "sha256:b"}
	require.True(t, a.Same(&AgentVersion{Digest: "sha256:a", Parts: map[string]string{"x": "y"}}))
	require.False(t, a.Same(b))
	require.False(t, a.Same(nil))
	require.False(t, (*AgentVersion)(nil).Same(a))
	require.True(t, (*AgentVersion)(nil).Same(nil))
}

func TestCheckAgentChange(t *testing.T) {
	t.Parallel()
	data := AgentChangedData{Old: "sha256:a", New: "sha256:b", Changed: []string{"model"}, Action: AgentChangeContinue}
	require.NoError(t, CheckAgentChange(&TaskAgentChangeParams{Data: data, Version: &AgentVersion{Digest: "sha256:b"}}))
	fail := data
	fail.Action = AgentChangeFail
	require.NoError(t, CheckAgentChange(&TaskAgentChangeParams{Data: fail}))
	bad := data
	bad.Action = "ignore"
	require.EqualError(t, CheckAgentChange(&TaskAgentChangeParams{Data: bad}), `action "ignore": want continue or fail`)
	require.EqualError(t, CheckAgentChange(&TaskAgentChangeParams{Data: data, Version: &AgentVersion{Digest: "sha256:c"}}),
		"version sha256:c is not the new digest sha256:b")
}

func TestChangeAgent(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	data := AgentChangedData{Old: "sha256:a", New: "sha256:b", Changed: []string{"model"}, Action: AgentChangeContinue}
	for _, tc := range []struct {
		name    string
		w       fakeStepWriter
		version *AgentVersion
		calls   []string
		events  []string
		err     error
	}{
		{name: "LeaseLost", w: fakeStepWriter{leaseErr: ErrLeaseLost}, calls: []string{"check"}, err: ErrLeaseLost},
		{name: "Continue", version: &AgentVersion{Digest: "sha256:b"},
			calls: []string{"check", `version {"digest":"sha256:b"}`}, events: []string{EventTaskAgentChanged}},
		{name: "FailKeepsTheVersion", calls: []string{"check"}, events: []string{EventTaskAgentChanged}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := tc.w
			err := ChangeAgent(context.Background(), &w, &TaskAgentChangeParams{
				Lease: Lease{TaskID: "tsk_1", Token: 1}, Data: data, Version: tc.version,
			}, at)
			require.ErrorIs(t, err, tc.err)
			require.Equal(t, tc.calls, w.calls)
			require.Equal(t, tc.events, w.eventTypes)
		})
	}
}
