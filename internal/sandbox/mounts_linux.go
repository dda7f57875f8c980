//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Metadata confinement. Landlock governs opening, creating, removing and renaming
// files, not chmod, chown, utime or extended attributes: without more, a confined
// command could set the set-uid bit on a host file, chmod a raw disk's device node
// 0666, or set security xattrs. Two layers close that (docs/confinement.md, "Metadata
// outside the workspace"):
//
//   - read-only mounts: in the sandbox's mount namespace every mount is made read-only
//     (recursively, /proc, /sys and /dev included) except the writable roots, which
//     become mounts of their own, nosuid and nodev. chmod, chown, utimes, xattr calls,
//     mknod and truncate on anything else then fail with EROFS, whatever the uid.
//     Devices still work: writing /dev/null on a read-only mount is allowed.
//   - an unprivileged uid: when toolgate is the host's root the command runs as
//     SandboxUID, so ownership checks refuse the rest. Root's files in the workspace
//     would then not be the command's: each writable root is therefore an id-mapped
//     mount (host uid 0 there is the command's uid), made by toolgate (only the host's
//     root may id-map a host file system) and handed to the helper as a detached mount.
//     A directory above a root that SandboxUID could not even search (/root, a private
//     temporary directory) is covered the same way, read-only, so paths keep working.

// attachMount is a detached mount, inherited as descriptor FD, that the helper moves
// onto Path before any other mount change.
type attachMount struct {
	FD       int    `json:"fd"`
	Path     string `json:"path"`
	Writable bool   `json:"writable"`
}

// mountSet is what toolgate prepares for one call: the detached mounts (their
// descriptors go to the helper as extra files) and the order to attach them in.
type mountSet struct {
	files  []*os.File
	attach []attachMount
}

func (m *mountSet) close() {
	for _, f := range m.files {
		f.Close()
	}
}

// firstAttachFD is the helper's descriptor number of the first detached mount (after
// the config and status pipes).
const firstAttachFD = 5

// prepareMounts makes the id-mapped mounts a remapped identity needs: one per writable
// root (read-write), and one read-only per directory above a root (writable or
// read-only) that SandboxUID could not search. Nothing is needed otherwise.
func prepareMounts(id identity, writable, readOnly []string) (*mountSet, error) {
	m := &mountSet{}
	if !id.remapped {
		return m, nil
	}
	var roots, covers []string
	for _, w := range writable {
		w = filepath.Clean(w)
		if _, err := os.Stat(w); err != nil {
			continue
		}
		roots = append(roots, w)
		if c := unsearchableAbove(filepath.Dir(w)); c != "" {
			covers = append(covers, c)
		}
	}
	for _, r := range readOnly {
		if c := unsearchableAbove(filepath.Clean(r)); c != "" {
			covers = append(covers, c)
		}
	}
	covers = outermost(covers)
	// A cover inside a writable root is redundant: the root's own mount maps it.
	covers = slices.DeleteFunc(covers, func(c string) bool {
		return slices.ContainsFunc(roots, func(r string) bool { return within(c, r) })
	})
	ns, err := idmapUserNS()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	sortByDepthStrings(covers)
	sortByDepthStrings(roots)
	for _, p := range covers {
		if err := m.add(ns, p, false); err != nil {
			m.close()
			return nil, err
		}
	}
	for _, p := range roots {
		if err := m.add(ns, p, true); err != nil {
			m.close()
			return nil, err
		}
	}
	return m, nil
}

// add clones the mount tree at path (detached) and id-maps its top mount with ns.
func (m *mountSet) add(ns *os.File, path string, writable bool) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("%w: cloning the mount at %s for an id-mapped mount: %v", ErrUnavailable, path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns.Fd())}
	if !writable {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		f.Close()
		fsType := ""
		var st unix.Statfs_t
		if unix.Statfs(path, &st) == nil {
			fsType = fmt.Sprintf(" (file system type %#x)", st.Type)
		}
		return fmt.Errorf("%w: id-mapping %s%s: %v; toolgate runs as root, and the sandbox runs commands as uid %d with the workspace id-mapped, which needs a file system that supports id-mapped mounts (ext4, xfs, btrfs, tmpfs on Linux 6.3+); run toolgate as an ordinary user otherwise",
			ErrUnavailable, path, fsType, err, SandboxUID)
	}
	m.attach = append(m.attach, attachMount{FD: firstAttachFD + len(m.files), Path: path, Writable: writable})
	m.files = append(m.files, f)
	return nil
}

// unsearchableAbove returns the outermost directory from / down to p (p included)
// that is owned by root and not searchable by others, or "" when SandboxUID can walk
// the whole path. (Directories of other owners are left alone: the sandbox could not
// search them before either, and id-mapping root's ids would not help.)
func unsearchableAbove(p string) string {
	if !filepath.IsAbs(p) {
		return ""
	}
	cur := "/"
	for _, part := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		if part != "" {
			cur = filepath.Join(cur, part)
		}
		var st unix.Stat_t
		if err := unix.Stat(cur, &st); err != nil {
			return ""
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Uid == 0 && st.Mode&0o001 == 0 {
			return cur
		}
	}
	return ""
}

// outermost drops every path that lies within another one of the list.
func outermost(ps []string) []string {
	var out []string
	for _, p := range ps {
		if slices.ContainsFunc(ps, func(q string) bool { return q != p && within(p, q) }) || slices.Contains(out, p) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// within reports whether p is q or lies beneath it.
func within(p, q string) bool {
	return p == q || q == "/" || strings.HasPrefix(p, q+"/")
}

func sortByDepthStrings(ps []string) {
	slices.SortStableFunc(ps, func(a, b string) int {
		return strings.Count(a, "/") - strings.Count(b, "/")
	})
}

// attachMounts moves the detached mounts toolgate prepared into place (helper side).
func attachMounts(ms []attachMount) error {
	for _, a := range ms {
		err := unix.MoveMount(a.FD, "", unix.AT_FDCWD, a.Path, unix.MOVE_MOUNT_F_EMPTY_PATH)
		unix.Close(a.FD)
		if err != nil {
			return fmt.Errorf("attaching the id-mapped mount of %s: %w", a.Path, err)
		}
	}
	return nil
}

// readOnlyExcept makes every mount of this namespace read-only except the writable
// roots (helper side). Each writable root first becomes a mount of its own (a recursive
// bind onto itself, unless an attached mount already is one), then the whole tree is
// made read-only in one call, then the roots are made writable again, nosuid and nodev.
// Mounts beneath a writable root (rare; the host's) stay read-only.
func readOnlyExcept(writable []string, attached []attachMount) error {
	var roots []string
	for _, w := range writable {
		w = filepath.Clean(w)
		if _, err := os.Stat(w); errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return fmt.Errorf("checking writable root %s: %w", w, err)
		}
		if !slices.Contains(roots, w) {
			roots = append(roots, w)
		}
	}
	sortByDepthStrings(roots)
	for _, w := range roots {
		if slices.ContainsFunc(attached, func(a attachMount) bool { return a.Writable && a.Path == w }) {
			continue
		}
		if err := unix.Mount(w, w, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind-mounting writable root %s: %w", w, err)
		}
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("making every mount read-only: %w", err)
	}
	for _, w := range roots {
		attr := unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY, Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
		if err := unix.MountSetattr(unix.AT_FDCWD, w, 0, &attr); err != nil {
			return fmt.Errorf("making writable root %s writable again: %w", w, err)
		}
	}
	return nil
}
