package main

import (
	"bytes"
	"encoding/json"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBenchJSON(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"bench", "--tasks", "300", "--workers", "4", "--latency-samples", "20", "--dir", t.TempDir(), "--json"}, &stdout, &stderr)
	require.NoError(t, err, stderr.String())

	var report map[string]any
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &report))
	for _, key := range []string{"tasks", "workers", "submit_per_s", "e2e_per_s", "latency_p50_ms", "latency_p99_ms", "peak_rss_mb"} {
		require.Contains(t, report, key)
	}
	require.EqualValues(t, 300, report["tasks"])
	require.EqualValues(t, 4, report["workers"])
	require.Positive(t, report["e2e_per_s"])
	require.Positive(t, report["submit_per_s"])
	require.Positive(t, report["latency_p50_ms"])
	require.GreaterOrEqual(t, report["latency_p99_ms"], report["latency_p50_ms"])
}

func TestBenchText(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"bench", "--tasks", "50", "--latency-samples", "5", "--dir", t.TempDir()}, &stdout, &stderr)
	require.NoError(t, err)
	require.Contains(t, stdout.String(), "end to end")
	require.Contains(t, stdout.String(), "start latency    p50")
}

func TestBadFlagsAreErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"bench", "--durability", "sometimes"},
		{"bench", "--tasks", "0"},
		{"bench", "extra"},
		{"no-such-command"},
	} {
		var stdout, stderr bytes.Buffer
		require.Error(t, run(t.Context(), args, &stdout, &stderr), args)
	}
}

// The binary collects at GOGC=200 unless the operator sets GOGC, whose
// value (even Go's default, written out) then stands.
func TestGCPaceFollowsGOGC(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	unset := func(string) (string, bool) { return "", false }
	require.Equal(t, defaultGCPercent, tuneGC(unset))
	require.Equal(t, defaultGCPercent, debug.SetGCPercent(100), "the pace in force")

	set := func(k string) (string, bool) { return "100", k == "GOGC" }
	require.Equal(t, 0, tuneGC(set))
	require.Equal(t, 100, debug.SetGCPercent(100), "GOGC=100 stands")
}
