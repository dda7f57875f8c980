package workspace

import (
	"errors"
	"fmt"
)

// OutsideError is a path the workspace refuses because it is, or leads, outside the
// workspace: absolute, "..", NUL bytes, too long, or through a symbolic link that points
// out. The kernel reports it as denied, path_outside_workspace (docs/reason-codes.md);
// confinement itself knows nothing of reason codes.
type OutsideError struct {
	// Path is the path as it was given (cut short when it was very long).
	Path string
	// Reason says why, for the caller: "absolute paths are refused; …".
	Reason string
}

func (e *OutsideError) Error() string {
	return fmt.Sprintf("path %q is outside the workspace: %s", e.Path, e.Reason)
}

// ErrTooManyLinks is wrapped by a resolution that followed more than 40 symbolic
// links (a cycle, most likely).
var ErrTooManyLinks = errors.New("too many levels of symbolic links")
