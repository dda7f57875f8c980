package cli

import (
	"runtime/debug"

	"github.com/toolgate/toolgate/internal/localtools"
	"github.com/toolgate/toolgate/internal/workspace"
)

// buildVersion is the module version stamped into the binary, "(devel)" for a local build.
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// addConfinedTools is kept for the commands that call it before localtools.Build. It
// has nothing left to do: Build itself adds bash, the git tools and the sandbox runner
// for declarative tools whenever a workspace is set (Config.NoConfined opts out).
func addConfinedTools(cfg *localtools.Config, ws *workspace.Workspace) {}
