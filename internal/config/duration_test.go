package config

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

func TestDuration(t *testing.T) {
	t.Parallel()

	t.Run("Parse", func(t *testing.T) {
		t.Parallel()
		tests := []struct {
			in   string
			want time.Duration
			err  string
		}{
			{in: "90s", want: 90 * time.Second},
			{in: "5m", want: 5 * time.Minute},
			{in: "720h", want: 720 * time.Hour},
			{in: "1h30m", want: 90 * time.Minute},
			{in: "1.5s", want: 1500 * time.Millisecond},
			{in: "0", want: 0},
			{in: "0s", want: 0},
			{in: "90", err: `"90" has no unit: write a duration like 90s, 5m or 720h`},
			{in: "1.5", err: `"1.5" has no unit: write a duration like 90s, 5m or 720h`},
			{in: "-5s", err: `"-5s" must not be negative`},
			{in: "5 m", err: `"5 m" is not a duration like 90s, 5m or 720h`},
			{in: "7d", err: `"7d" is not a duration like 90s, 5m or 720h`},
			{in: "", err: `"" is not a duration like 90s, 5m or 720h`},
			{in: "99999999999h", err: `"99999999999h" is not a duration like 90s, 5m or 720h`},
		}
		for _, tt := range tests {
			got, err := ParseDuration(tt.in)
			if tt.err != "" {
				require.EqualError(t, err, tt.err, tt.in)
				continue
			}
			require.NoError(t, err, tt.in)
			require.Equal(t, Duration(tt.want), got, tt.in)
		}
	})

	t.Run("YAMLRoundTrip", func(t *testing.T) {
		t.Parallel()
		type doc struct {
			D Duration `yaml:"d"`
		}
		for _, in := range []string{"90s", "5m", "720h", "1h2m3.5s", "0s", "1ns"} {
			var v doc
			require.NoError(t, yaml.Unmarshal([]byte("d: "+in), &v))
			out, err := yaml.Marshal(v)
			require.NoError(t, err)
			require.Equal(t, "d: "+time.Duration(v.D).String()+"\n", string(out))
			var back doc
			require.NoError(t, yaml.Unmarshal(out, &back))
			require.Equal(t, v, back, in)
		}
		out, err := yaml.Marshal(doc{D: Duration(90 * time.Second)})
		require.NoError(t, err)
		require.Equal(t, "d: 1m30s\n", string(out))

		var v doc
		require.EqualError(t, yaml.Unmarshal([]byte("d: 90"), &v), `"90" has no unit: write a duration like 90s, 5m or 720h`)
		require.EqualError(t, yaml.Unmarshal([]byte("d: {a: 1}"), &v), "must be a duration like 90s, 5m or 720h")
	})

	t.Run("JSONRoundTrip", func(t *testing.T) {
		t.Parallel()
		out, err := json.Marshal(map[string]Duration{"d": Duration(720 * time.Hour)})
		require.NoError(t, err)
		require.JSONEq(t, `{"d": "720h0m0s"}`, string(out))
		var back map[string]Duration
		require.NoError(t, json.Unmarshal(out, &back))
		require.Equal(t, Duration(720*time.Hour), back["d"])
		require.Error(t, json.Unmarshal([]byte(`{"d": "-1s"}`), &back))
	})

	t.Run("String", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "2m0s", Duration(2*time.Minute).String())
	})
}
