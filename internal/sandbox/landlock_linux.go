//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// landlockAttr is struct landlock_ruleset_attr as of ABI 6 (three fields). Newer
// kernels accept this size; older ones accept it while the fields they do not know are
// zero, which restrictSelf ensures.
type landlockAttr struct {
	handledFS  uint64
	handledNet uint64
	scoped     uint64
}

// Filesystem rights by the ABI that introduced them.
const (
	llFSv1 = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	llFSv2 = llFSv1 | unix.LANDLOCK_ACCESS_FS_REFER
	llFSv3 = llFSv2 | unix.LANDLOCK_ACCESS_FS_TRUNCATE
	llFSv5 = llFSv3 | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV

	// Rights that make sense on a file (the kernel refuses others in a file rule).
	llFileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE |
		unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	llReadRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR
)

// Devices the command may open; nothing else under /dev (block devices owned by the
// sandbox's uid would otherwise expose a whole disk).
var (
	writableDevices = []string{"/dev/null", "/dev/zero", "/dev/full"}
	readableDevices = []string{"/dev/random", "/dev/urandom"}
)

// LandlockABI returns the kernel's Landlock ABI version, or 0 when Landlock is missing
// or disabled.
func LandlockABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// handledFor returns the filesystem rights ABI abi can restrict.
func handledFor(abi int) uint64 {
	switch {
	case abi >= 5:
		return llFSv5
	case abi >= 3:
		return llFSv3
	case abi == 2:
		return llFSv2
	default:
		return llFSv1
	}
}

// restrictSelf confines the calling thread (and whatever it execs) to reading and
// executing under readOnly, listing directories under listOnly, and doing anything
// under writable. Missing paths are skipped. From ABI 6 on it also scopes abstract UNIX
// sockets and signals to the sandbox.
func restrictSelf(readOnly, listOnly, writable []string) error {
	abi := LandlockABI()
	if abi < 1 {
		return errors.New("landlock is not available in this kernel")
	}
	handled := handledFor(abi)
	attr := landlockAttr{handledFS: handled}
	if abi >= 6 {
		attr.scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET,
		uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return fmt.Errorf("creating ruleset: %w", errno)
	}
	ruleset := int(fd)
	defer unix.Close(ruleset)
	for _, p := range readOnly {
		if err := addPathRule(ruleset, p, llReadRights&handled); err != nil {
			return err
		}
	}
	for _, p := range listOnly {
		if err := addPathRule(ruleset, p, unix.LANDLOCK_ACCESS_FS_READ_DIR); err != nil {
			return err
		}
	}
	for _, p := range writable {
		if err := addPathRule(ruleset, p, handled); err != nil {
			return err
		}
	}
	if err := addPathRule(ruleset, "/dev", unix.LANDLOCK_ACCESS_FS_READ_DIR); err != nil {
		return err
	}
	for _, p := range readableDevices {
		if err := addPathRule(ruleset, p, unix.LANDLOCK_ACCESS_FS_READ_FILE); err != nil {
			return err
		}
	}
	for _, p := range writableDevices {
		if err := addPathRule(ruleset, p, (llReadRights|unix.LANDLOCK_ACCESS_FS_WRITE_FILE|
			unix.LANDLOCK_ACCESS_FS_TRUNCATE)&handled); err != nil {
			return err
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0); errno != 0 {
		return fmt.Errorf("restricting self: %w", errno)
	}
	return nil
}

// addPathRule allows rights beneath path. A missing path is skipped; a file gets only
// the rights that apply to files.
func addPathRule(ruleset int, path string, rights uint64) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		rights &= llFileRights
	}
	if rights == 0 {
		return nil
	}
	rule := unix.LandlockPathBeneathAttr{Allowed_access: rights, Parent_fd: int32(fd)}
	// struct landlock_path_beneath_attr is packed: 8 + 4 bytes.
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset),
		unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
	if errno != 0 {
		return fmt.Errorf("adding rule for %s: %w", path, errno)
	}
	return nil
}
