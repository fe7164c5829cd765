package server

import (
	"strings"
	"time"
)

// zoneName names the zone a spend guard's timezone counts in when it is
// "" (UTC) or "Local" (the daemon's zone): "Local" alone tells a reader
// nothing. It is "" for a zone that already names itself (Europe/Berlin).
// The local zone's IANA name comes from $TZ, else the /etc/localtime
// link, else its abbreviation at now.
func zoneName(tz string, lookup func(string) (string, bool), readlink func(string) (string, error)) string {
	switch tz {
	case "", "UTC":
		return "UTC"
	case "Local":
	default:
		return ""
	}
	if v, ok := lookup("TZ"); ok {
		v = strings.TrimPrefix(v, ":")
		if v == "" {
			return "UTC" // TZ set empty is UTC, as time.Local reads it
		}
		return zoneinfoName(v)
	}
	if target, err := readlink("/etc/localtime"); err == nil {
		if name := zoneinfoName(target); name != target {
			return name
		}
	}
	name, _ := time.Now().In(time.Local).Zone()
	if name == "" || name == "Local" {
		return ""
	}
	return name
}

// zoneinfoName turns a zoneinfo path (/usr/share/zoneinfo/Europe/Berlin)
// into its name; anything else is returned as it is.
func zoneinfoName(path string) string {
	if _, name, ok := strings.Cut(path, "zoneinfo/"); ok && name != "" {
		return name
	}
	return path
}
