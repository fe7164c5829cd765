package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A schedule's task template carries debounce as the API takes it, and a
// misspelt key inside it is named.
func TestScheduleTaskDebounce(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(`
schedules:
  smoke:
    kind: event
    spec: {type: deploy.finished}
    task: {goal: smoke-test, debounce: {key: smoke, period: 5m}}
`))
	require.NoError(t, err)
	require.Equal(t, TaskTemplate(`{"debounce":{"key":"smoke","period":"5m"},"goal":"smoke-test"}`), cfg.Schedules["smoke"].Task)

	_, err = Parse([]byte("schedules: {s: {kind: interval, spec: 1h, task: {goal: g, debounce: {key: k, perod: 5s}}}}"))
	require.ErrorContains(t, err, "schedules.s.task.debounce.perod: unknown key")
}
