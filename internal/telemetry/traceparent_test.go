package telemetry

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseTraceparent(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, header string
		ok           bool
		sampled      bool
	}{
		{"sampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true, true},
		{"not sampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true, false},
		{"other flags kept out", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-fe", true, false},
		{"a later version with more fields", "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds", true, true},
		{"version 00 with more", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", false, false},
		{"version ff", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false, false},
		{"upper case", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false, false},
		{"zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", false, false},
		{"zero parent id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false, false},
		{"short", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1", false, false},
		{"bad separator", "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false, false},
		{"not hex", "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01", false, false},
		{"empty", "", false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sc, ok := ParseTraceparent(tt.header)
			require.Equal(t, tt.ok, ok)
			if !ok {
				return
			}
			require.True(t, sc.IsRemote())
			require.Equal(t, tt.sampled, sc.IsSampled())
			require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", sc.TraceID().String())
			require.Equal(t, "00f067aa0ba902b7", sc.SpanID().String())
		})
	}
}

func TestWithTraceparent(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tt := range []struct {
		name, metadata, header, want string
	}{
		{"none yet", ``, tp, `{"errand.traceparent":"` + tp + `"}`},
		{"null", `null`, tp, `{"errand.traceparent":"` + tp + `"}`},
		{"empty object", ` { } `, tp, `{"errand.traceparent":"` + tp + `" }`},
		{"the caller's keys kept as written", `{"b": 1, "a": [2]}`, tp, `{"errand.traceparent":"` + tp + `","b": 1, "a": [2]}`},
		{"a bad header changes nothing", `{"b":1}`, "00-zz", `{"b":1}`},
		{"not an object is left to validation", `[1]`, tp, `[1]`},
		{"a key of the caller's wins", `{"errand.traceparent":"mine"}`, tp, `{"errand.traceparent":"mine"}`},
		{"flags normalised", `{}`, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03", `{"errand.traceparent":"` + tp + `"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, string(WithTraceparent(json.RawMessage(tt.metadata), tt.header)))
		})
	}
	sc, ok := metadataParent(WithTraceparent(json.RawMessage(`{"x":1}`), tp))
	require.True(t, ok)
	require.Equal(t, tp, FormatTraceparent(sc))
}

func TestRunTraceID(t *testing.T) {
	t.Parallel()
	a, b := RunTraceID("run_01"), RunTraceID("run_01")
	require.Equal(t, a, b, "the same on every attempt and in every process")
	require.True(t, a.IsValid())
	require.NotEqual(t, a, RunTraceID("run_02"))
}

// FuzzTraceparent: any header parses without panic; one that does not
// parse leaves the metadata byte for byte as it was; one that parses
// round-trips and leaves the metadata valid JSON whose other keys are
// unchanged.
func FuzzTraceparent(f *testing.F) {
	for _, s := range []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "", "00-", strings.Repeat("0", 55),
	} {
		f.Add(s, `{"a":1}`)
	}
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ``)
	f.Fuzz(func(t *testing.T, header, metadata string) {
		sc, ok := ParseTraceparent(header)
		out := WithTraceparent(json.RawMessage(metadata), header)
		if !ok {
			require.False(t, sc.IsValid())
			require.True(t, bytes.Equal([]byte(metadata), out), "a bad header writes nothing different")
			return
		}
		require.True(t, sc.IsValid())
		again, ok := ParseTraceparent(FormatTraceparent(sc))
		require.True(t, ok)
		require.Equal(t, sc, again)
		if bytes.Equal([]byte(metadata), out) {
			return // not an object, or the key is the caller's
		}
		var before, after map[string]json.RawMessage
		if len(bytes.TrimSpace([]byte(metadata))) > 0 && string(bytes.TrimSpace([]byte(metadata))) != "null" {
			require.NoError(t, json.Unmarshal([]byte(metadata), &before))
		}
		require.NoError(t, json.Unmarshal(out, &after), "%s", out)
		var kept string
		require.NoError(t, json.Unmarshal(after[MetadataKey], &kept))
		require.Equal(t, FormatTraceparent(sc), kept)
		delete(after, MetadataKey)
		require.Len(t, after, len(before))
	})
}
