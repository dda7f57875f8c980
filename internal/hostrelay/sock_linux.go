package hostrelay

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

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

// checkPeer makes sure the process at the other end of c is one of this user's, in
// this process's user namespace, and returns its pid. The uid is the effective uid the
// kernel recorded when the connection was made (SO_PEERCRED). The user namespace
// matters because bash's sandbox (docs/confinement.md) runs commands in a user
// namespace of their own, mapped to toolgate's uid when toolgate is not root: such a
// command has this uid, and where no seccomp filter stops it from making a unix
// socket it could otherwise reach the relay. The peer is pinned by a pidfd
// (SO_PEERPIDFD) while its /proc entry is read, so a pid reused meanwhile is caught;
// kernels before 6.5 have no pidfd for a peer and are checked by pid alone.
func checkPeer(c *net.UnixConn) (pid int, err error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var (
		cred       *unix.Ucred
		cerr, perr error
		pidfd      = -1
	)
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		pidfd, perr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, fmt.Errorf("hostrelay: SO_PEERCRED: %w", cerr)
	}
	if perr == nil {
		defer unix.Close(pidfd)
	} else {
		pidfd = -1
	}
	pid = int(cred.Pid)
	if want := os.Geteuid(); int(cred.Uid) != want {
		return pid, &PeerError{PID: pid, UID: int(cred.Uid), WantUID: want}
	}
	ours, err := os.Readlink("/proc/self/ns/user")
	if err != nil {
		return pid, nil // no /proc: the uid is all there is to check
	}
	theirs, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/user")
	if err == nil && pidfd >= 0 {
		if serr := unix.PidfdSendSignal(pidfd, 0, nil, 0); serr != nil {
			err = errors.New("it exited while it was checked")
		}
	}
	if err != nil {
		return pid, fmt.Errorf("hostrelay: checking the relay socket's other end (pid %d): %w", pid, err)
	}
	if theirs != ours {
		return pid, &PeerError{PID: pid, UID: int(cred.Uid), WantUID: int(cred.Uid), OtherUserNS: true}
	}
	return pid, nil
}
