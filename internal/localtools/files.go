package localtools

import (
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/workspace"
)

// fileTools are the workspace file tools, all confined by ws.
func fileTools(ws *workspace.Workspace) []*kernel.Tool {
	return []*kernel.Tool{readFileTool(ws), writeFileTool(ws), patchFileTool(ws), listFilesTool(ws)}
}
