// Package version reports toolgate's build version, as served in MCP's
// serverInfo.version and printed by the CLI. It reads the binary's build
// information, so no linker flags are needed: a module version when built from a
// tagged module, else the VCS revision (with "+dirty" for a modified tree), else
// "devel".
package version

import (
	"runtime/debug"
	"sync"
)

var (
	once  sync.Once
	value string
)

// String returns the build version; it never returns "".
func String() string {
	once.Do(func() {
		bi, ok := debug.ReadBuildInfo()
		if !ok {
			value = "devel"
			return
		}
		value = fromBuildInfo(bi)
	})
	return value
}

func fromBuildInfo(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	v := "devel-" + rev
	if modified == "true" {
		v += "+dirty"
	}
	return v
}
