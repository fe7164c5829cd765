package version

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCompute(t *testing.T) {
	t.Parallel()
	vcs := []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"},
		{Key: "vcs.time", Value: "2026-11-28T01:02:03Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	tests := []struct {
		name          string
		stamp, stTime string
		bi            *debug.BuildInfo
		want          Info
	}{
		{name: "no build info", want: Info{Version: Devel}},
		{
			name: "stamp wins", stamp: "v1.2.3", stTime: "2026-11-28T09:00:00Z",
			bi:   &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-x"}, Settings: vcs},
			want: Info{Version: "v1.2.3", Commit: "0123456789abcdef0123", Modified: true, GoVersion: "go1.26.0", BuildTime: "2026-11-28T09:00:00Z"},
		},
		{
			name: "module version",
			bi:   &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.4.0"}, Settings: vcs},
			want: Info{Version: "v0.4.0", Commit: "0123456789abcdef0123", Modified: true, GoVersion: "go1.26.0", BuildTime: "2026-11-28T01:02:03Z"},
		},
		{
			name: "devel with a commit",
			bi:   &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: vcs},
			want: Info{Version: "devel+0123456789ab.dirty", Commit: "0123456789abcdef0123", Modified: true, GoVersion: "go1.26.0", BuildTime: "2026-11-28T01:02:03Z"},
		},
		{
			name: "devel",
			bi:   &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			want: Info{Version: Devel, GoVersion: "go1.26.0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := compute(tt.stamp, tt.stTime, tt.bi)
			if tt.bi == nil {
				tt.want.GoVersion = got.GoVersion
				require.NotEmpty(t, got.GoVersion)
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestStringIsGetVersion(t *testing.T) {
	t.Parallel()
	require.Equal(t, Get().Version, String())
	require.NotEmpty(t, String())
	require.NotEqual(t, "(devel)", String())
}
