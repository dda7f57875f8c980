//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// closeInheritedFDs marks every descriptor above stderr close-on-exec, so the command
// starts with stdin, stdout and stderr only. os/exec passes on any descriptor that
// lacks close-on-exec, and descriptors toolgate itself inherited from whoever started
// it (a harness, a shell) lack it: without this, such a descriptor — a socket to the
// host, a file outside the workspace — would reach the command past the network
// namespace, Landlock and the seccomp filter, which all act on opening, not on using.
// The status pipe (fd 4) is close-on-exec already, so failures are still reported.
func closeInheritedFDs() error {
	err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	// Kernels before 5.11: walk the open descriptors instead.
	d, derr := os.Open("/proc/self/fd")
	if derr != nil {
		return fmt.Errorf("closing inherited descriptors: %v; listing them: %w", err, derr)
	}
	names, derr := d.Readdirnames(-1)
	d.Close()
	if derr != nil {
		return fmt.Errorf("closing inherited descriptors: listing them: %w", derr)
	}
	for _, n := range names {
		fd, cerr := strconv.Atoi(n)
		if cerr != nil || fd < 3 {
			continue
		}
		unix.CloseOnExec(fd)
	}
	return nil
}

// StopInheritingDescriptors marks every descriptor toolgate itself inherited (above
// stderr) close-on-exec, once, at process start: then no child toolgate starts — git,
// an upstream server, a harness under `toolgate run` — can receive a descriptor its
// parent leaked to toolgate. The sandboxed command gets the same treatment again just
// before its execve.
func StopInheritingDescriptors() error { return closeInheritedFDs() }
