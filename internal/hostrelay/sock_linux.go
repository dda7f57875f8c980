package hostrelay

import (
	"fmt"
	"net"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// maxSunPath is the longest path a unix socket address holds (sun_path is 108 bytes
// with its terminating NUL).
const maxSunPath = len(unix.RawSockaddrUnix{}.Path) - 1

// openDir opens the data directory for the *at system calls and for socketAddr; the
// descriptor is not inherited by children.
func openDir(dir string) (int, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("hostrelay: opening data directory %s: %w", dir, err)
	}
	return fd, nil
}

// socketAddr is the address the relay socket is bound and reached at: its path in the
// data directory, or, when that is longer than sun_path holds, the same file reached
// through this process's descriptor of the directory (/proc/self/fd/N/upstream.sock):
// the socket stays in the data directory, under its permissions.
func socketAddr(dir string, dirfd int) (string, error) {
	p := filepath.Join(dir, sockName)
	if len(p) <= maxSunPath {
		return p, nil
	}
	alt := fmt.Sprintf("/proc/self/fd/%d/%s", dirfd, sockName)
	var st, want unix.Stat_t
	if err := unix.Stat(filepath.Dir(alt), &st); err != nil {
		return "", fmt.Errorf("hostrelay: the socket path %s is %d bytes (a unix socket's is at most %d) and /proc/self/fd cannot stand in for it: %w",
			p, len(p), maxSunPath, err)
	}
	if err := unix.Fstat(dirfd, &want); err != nil || st.Dev != want.Dev || st.Ino != want.Ino {
		return "", fmt.Errorf("hostrelay: the socket path %s is %d bytes (a unix socket's is at most %d) and /proc/self/fd does not lead to the data directory",
			p, len(p), maxSunPath)
	}
	return alt, nil
}

// peerCred returns the pid and effective uid of the process at the other end of c, as
// the kernel recorded them when the connection was made (SO_PEERCRED).
func peerCred(c *net.UnixConn) (pid, uid int, err error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, 0, err
	}
	if cerr != nil {
		return 0, 0, fmt.Errorf("hostrelay: SO_PEERCRED: %w", cerr)
	}
	return int(cred.Pid), int(cred.Uid), nil
}
