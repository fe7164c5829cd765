package server

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestZoneName(t *testing.T) {
	t.Parallel()
	env := func(vars map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	}
	link := func(target string) func(string) (string, error) {
		return func(string) (string, error) {
			if target == "" {
				return "", errors.New("not a link")
			}
			return target, nil
		}
	}
	for _, tt := range []struct {
		name, tz string
		env      map[string]string
		link     string
		want     string
	}{
		{name: "empty is UTC", tz: "", want: "UTC"},
		{name: "named zone", tz: "Europe/Berlin", link: "/usr/share/zoneinfo/Asia/Tokyo", want: ""},
		{name: "TZ", tz: "Local", env: map[string]string{"TZ": "America/New_York"}, want: "America/New_York"},
		{name: "TZ with colon and path", tz: "Local", env: map[string]string{"TZ": ":/usr/share/zoneinfo/Europe/Paris"}, want: "Europe/Paris"},
		{name: "TZ empty", tz: "Local", env: map[string]string{"TZ": ""}, want: "UTC"},
		{name: "localtime link", tz: "Local", link: "/usr/share/zoneinfo/Europe/Berlin", want: "Europe/Berlin"},
		{name: "relative link", tz: "Local", link: "../usr/share/zoneinfo/Asia/Tokyo", want: "Asia/Tokyo"},
	} {
		require.Equal(t, tt.want, zoneName(tt.tz, env(tt.env), link(tt.link)), tt.name)
	}
}
