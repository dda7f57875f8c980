package cli

import (
	"runtime/debug"

	"github.com/toolgate/toolgate/internal/localtools"
	"github.com/toolgate/toolgate/internal/workspace"
)

// addConfinedTools adds the tools that run programs (bash, git, declarative tools) once
// the sandbox that confines them is available.
func addConfinedTools(cfg *localtools.Config, ws *workspace.Workspace) {}

func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
