//go:build !linux

package hostrelay

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"

	"golang.org/x/sys/unix"
)

const maxSunPath = len(unix.RawSockaddrUnix{}.Path) - 1

func openDir(dir string) (int, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("hostrelay: opening data directory %s: %w", dir, err)
	}
	return fd, nil
}

func socketAddr(dir string, _ int) (string, error) {
	p := filepath.Join(dir, sockName)
	if len(p) > maxSunPath {
		return "", fmt.Errorf("hostrelay: the socket path %s is %d bytes; a unix socket's is at most %d here", p, len(p), maxSunPath)
	}
	return p, nil
}

// checkPeer is implemented for Linux only: elsewhere no relay connection is accepted
// or made (a process hosts only if it wins the lock).
func checkPeer(*net.UnixConn) (pid int, err error) {
	return 0, errors.ErrUnsupported
}
