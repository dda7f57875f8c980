package shelltool

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/toolgate/toolgate/internal/workspace"
)

// ensureAgentsTools makes sure the declarative tool definitions (.agents/tools) exist
// as a directory before a command runs, so they can be mounted read-only like the
// other protected paths: otherwise a command could create .agents/tools/main/*.json
// where there was none, and the next toolgate mcp in this workspace would publish the
// tool it planted. (An empty directory, as ensureHooksDir makes .git/hooks.) When
// .agents is not a directory it is returned, to be pinned read-only itself, so it
// cannot be replaced by one. Everything goes through the workspace root, so a link
// cannot make this create anything outside.
func ensureAgentsTools(ws *workspace.Workspace) (pin []string, err error) {
	fi, err := ws.Root().Lstat(".agents")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := ws.Root().Mkdir(".agents", 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("creating .agents to protect .agents/tools: %w", err)
		}
	case err != nil:
		return nil, fmt.Errorf("checking .agents: %w", err)
	case !fi.IsDir():
		return []string{filepath.Join(ws.Dir(), ".agents")}, nil
	}
	if err := ws.Root().Mkdir(".agents/tools", 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("creating .agents/tools to protect it: %w", err)
	}
	return nil, nil
}
