//go:build linux && !amd64

package sandbox_test

import "golang.org/x/sys/unix"

// legacySetIDProbe: chmod, open, creat and mknod exist only as their *at forms here.
func legacySetIDProbe(func(string, uintptr, ...uintptr), func(string) uintptr) {}

// futimesat: arm64 has no futimesat; utimensat stands in.
func futimesat(path string, tv []unix.Timeval) error {
	ts := []unix.Timespec{unix.NsecToTimespec(unix.TimevalToNsec(tv[0])), unix.NsecToTimespec(unix.TimevalToNsec(tv[1]))}
	return unix.UtimesNanoAt(unix.AT_FDCWD, path, ts, 0)
}
