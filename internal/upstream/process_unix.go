//go:build unix

package upstream

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

var (
	sigTERM = syscall.SIGTERM
	sigKILL = syscall.SIGKILL
)

// signalGroup signals every process in the group pgid; a group already gone is
// not an error.
func signalGroup(pgid int, sig syscall.Signal) {
	if pgid <= 1 {
		return // never the caller's own group or every process
	}
	_ = syscall.Kill(-pgid, sig)
}

func exitStatus(ps *os.ProcessState, waitErr error) ExitStatus {
	if ps == nil {
		return ExitStatus{Code: -1}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ExitStatus{Code: -1, Signal: ws.Signal()}
	}
	return ExitStatus{Code: ps.ExitCode()}
}

func isExecutable(fi fs.FileInfo) bool { return fi.Mode()&0o111 != 0 }

// groupAliveBySignal reports whether any process of the group exists (zombies
// included).
func groupAliveBySignal(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
