package cli

import (
	"fmt"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/localtools"
	"github.com/toolgate/toolgate/internal/version"
	"github.com/toolgate/toolgate/internal/workspace"
)

// testTools are registered in addition to toolgate's own tools by every command that
// builds them here; only tests set it (to hold a call in flight across a shutdown).
var testTools []*kernel.Tool

// ownTools builds the tools toolgate itself provides to a daemon or a bridge: the control
// plane (server.*) always, and the local tools confined to dir when dir is set. Every
// surface that opens an app goes through here, so a bridge, a run and a daemon over the
// same data directory publish the same tools for the same grants. The returned close
// releases the workspace. dataDir is refused inside the workspace.
func ownTools(env *Env, dir, dataDir, command string) ([]*kernel.Tool, func(), error) {
	cfg := localtools.Config{Warn: env.Err, Version: version.String(), DataDir: dataDir,
		DisabledReason: command + " was started without --workspace", ControlPlane: env.controlPlane}
	closeWS := func() {}
	if dir != "" {
		ws, err := workspace.Open(dir)
		if err != nil {
			return nil, nil, fmt.Errorf("--workspace: %w", err)
		}
		cfg.Workspace, cfg.DisabledReason = ws, ""
		closeWS = func() { ws.Close() }
	}
	tools, err := localtools.Build(cfg)
	if err != nil {
		closeWS()
		return nil, nil, err
	}
	return append(tools, testTools...), closeWS, nil
}
