//go:build linux

package sandbox_test

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// legacySetIDProbe tries the old system calls amd64 still has.
func legacySetIDProbe(sys func(string, uintptr, ...uintptr), path func(string) uintptr) {
	sys("chmod_setuid", unix.SYS_CHMOD, path("f"), 0o4755)
	sys("open_creat_setuid", unix.SYS_OPEN, path("h"), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o4755)
	sys("creat_setuid", unix.SYS_CREAT, path("i"), 0o4755)
	sys("mknod_setuid", unix.SYS_MKNOD, path("k"), unix.S_IFREG|0o4755, 0)
}

// futimesat calls the old futimesat system call, which amd64 still has.
func futimesat(path string, tv []unix.Timeval) error {
	_, _, e := unix.Syscall(unix.SYS_FUTIMESAT, atFDCWD, cstr(path), uintptr(unsafe.Pointer(&tv[0])))
	return errnoOrNil(e)
}
