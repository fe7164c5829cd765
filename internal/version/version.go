// Package version says which errand this binary is. Every surface that
// names a version (errand version, /api/status, /healthz, the A2A cards,
// MCP server info) reads it here, so they always agree.
//
// The version comes from, in order: the -ldflags stamp `make build` sets
// (-X github.com/errandhq/errand/internal/version.version=$(git describe
// --tags --always --dirty)); the module version `go build` or `go install`
// records (a tag, or a pseudo-version in a git checkout); else "devel"
// followed by the commit when the build recorded one.
package version

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// Set with -ldflags "-X github.com/errandhq/errand/internal/version.version=v1.2.3
// -X github.com/errandhq/errand/internal/version.buildTime=2026-01-02T03:04:05Z".
var (
	version   string
	buildTime string
)

// Devel is the version of a build that records neither a stamp nor a
// module version (go run, go test).
const Devel = "devel"

// Info is what `errand version --json` prints.
type Info struct {
	// Version is the release version, as String returns it.
	Version string `json:"version"`
	// Commit is the VCS revision the binary was built from ("" unknown).
	Commit string `json:"commit"`
	// Modified is true when the work tree had uncommitted changes.
	Modified bool `json:"modified"`
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string `json:"go_version"`
	// BuildTime is the stamped build time, else the commit's time (RFC
	// 3339; "" unknown).
	BuildTime string `json:"build_time"`
}

// Get returns the binary's version information.
func Get() Info { return get() }

// String returns the version string.
func String() string { return get().Version }

var get = sync.OnceValue(func() Info {
	bi, _ := debug.ReadBuildInfo()
	return compute(version, buildTime, bi)
})

// compute builds Info from the -X stamps and the build info (nil when the
// binary has none).
func compute(stamped, stampedTime string, bi *debug.BuildInfo) Info {
	info := Info{Version: stamped, BuildTime: stampedTime, GoVersion: runtime.Version()}
	if bi == nil {
		info.Version = cmpOr(info.Version, Devel)
		return info
	}
	info.GoVersion = cmpOr(bi.GoVersion, info.GoVersion)
	var vcsTime string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.time":
			vcsTime = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	info.BuildTime = cmpOr(info.BuildTime, vcsTime)
	if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		info.Version = bi.Main.Version
	}
	if info.Version == "" {
		info.Version = Devel
		if info.Commit != "" {
			info.Version += "+" + short(info.Commit)
			if info.Modified {
				info.Version += ".dirty"
			}
		}
	}
	return info
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
