package localtools

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/workspace"
)

// readAccess names the real file a read touches: the path with its links resolved.
func readAccess(ws *workspace.Workspace, p string) (kernel.Access, error) {
	rel, err := ws.Rel(p)
	if err != nil {
		return kernel.Access{}, err
	}
	return kernel.Access{Action: kernel.ActionRead, Resource: "path:" + rel}, nil
}

// writeAccess names the file a write touches. Writes never go through a symbolic link
// (the lexical path and the real path are then the same, so a grant naming one names
// the other), and protected paths are marked with the protected path they lie in, which
// a grant must name (or lie inside) to allow the write.
func writeAccess(ws *workspace.Workspace, p string) (kernel.Access, string, error) {
	rel, err := ws.Rel(p)
	if err != nil {
		return kernel.Access{}, "", err
	}
	if err := refuseLinks(ws, p); err != nil {
		return kernel.Access{}, "", err
	}
	if rel == "." {
		return kernel.Access{}, "", kernel.Failed(kernel.CodeInvalidArguments, "path %q is the workspace itself, not a file", p)
	}
	acc := kernel.Access{Action: kernel.ActionWrite, Resource: "path:" + rel}
	root, protected, err := ws.ProtectedRoot(rel)
	if err != nil {
		return kernel.Access{}, "", err
	}
	if protected {
		acc.Protected, acc.ProtectedRoot = true, "path:"+root
	}
	return acc, rel, nil
}

func refuseLinks(ws *workspace.Workspace, p string) error {
	c, err := workspace.Clean(p)
	if err != nil {
		return err
	}
	has, err := ws.HasLink(c)
	if err != nil {
		return err
	}
	if has {
		return kernel.Denied(kernel.CodePathOutsideWorkspace,
			"path %q goes through a symbolic link; the write tools never write through links (use the link's target path)", p)
	}
	return nil
}

// checkWritable refuses to replace anything but a regular file with a single link: a
// file with Nlink > 1 may be a hard link to a file outside the workspace, which os.Root
// cannot see. A missing file is fine (it will be created).
func checkWritable(ws *workspace.Workspace, rel string) (mode fs.FileMode, exists bool, err error) {
	fi, err := ws.Root().Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return 0o644, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("checking %s: %w", rel, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return 0, false, kernel.Denied(kernel.CodePathOutsideWorkspace, "%s is a symbolic link; refusing to write through it", rel)
	}
	if !fi.Mode().IsRegular() {
		return 0, false, kernel.Failed(kernel.CodeToolFailed, "%s is not a regular file (%s)", rel, fileKind(fi.Mode()))
	}
	if n := nlink(fi); n > 1 {
		return 0, false, kernel.Denied(kernel.CodePathOutsideWorkspace,
			"%s has %d hard links; it may be a file outside the workspace, so it is not written", rel, n)
	}
	return fi.Mode().Perm(), true, nil
}

// nlink is a file's hard-link count (1 where the system does not say).
func nlink(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file"
}

// openRegular opens rel for reading without ever blocking (O_NONBLOCK, so a FIFO or a
// device returns at once) and without following a link swapped in after resolution
// (O_NOFOLLOW), then requires the opened file itself to be regular and to have one
// name: a file with several hard links may share its inode with a file outside the
// workspace that someone else linked in (os.Root cannot see where the other names
// are), so its content is not read. bash cannot make such a link (Landlock refuses a
// link whose source is read-only to it), and the file tools never make links.
func openRegular(ws *workspace.Workspace, rel string) (*os.File, fs.FileInfo, error) {
	f, err := ws.Root().OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_NOCTTY, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, kernel.Failed(kernel.CodeToolFailed, "%s does not exist", rel)
		}
		if errors.Is(err, syscall.ELOOP) {
			return nil, nil, kernel.Denied(kernel.CodePathOutsideWorkspace, "%s changed into a symbolic link", rel)
		}
		return nil, nil, kernel.Failed(kernel.CodeToolFailed, "opening %s: %v", rel, stripRoot(err))
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("stat %s: %w", rel, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, kernel.Failed(kernel.CodeToolFailed, "%s is %s; only regular files are read", rel, fileKind(fi.Mode()))
	}
	if n := nlink(fi); n > 1 {
		f.Close()
		return nil, nil, kernel.Denied(kernel.CodePathOutsideWorkspace,
			"%s has %d hard links; another name may be a file outside the workspace, so it is not read", rel, n)
	}
	return f, fi, nil
}

// stripRoot keeps the failing operation's reason but not the absolute workspace path
// os errors carry.
func stripRoot(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
