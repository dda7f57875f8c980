//go:build linux

package sandbox

import "golang.org/x/sys/unix"

// legacyModeCalls are amd64's older forms of setIDCalls (arm64 has only the *at ones).
var legacyModeCalls = []modeCall{
	{unix.SYS_CHMOD, 1, -1}, {unix.SYS_OPEN, 2, 1}, {unix.SYS_CREAT, 1, -1}, {unix.SYS_MKNOD, 1, -1},
}
