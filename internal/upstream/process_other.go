//go:build !unix

package upstream

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
)

var (
	sigTERM = syscall.Signal(15)
	sigKILL = syscall.Signal(9)
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

func spawn(*exec.Cmd) error {
	return errors.New("stdio upstream servers are supported only on Unix systems")
}

func signalGroup(int, syscall.Signal) {}

func groupAlive(int) bool { return false }

func exitStatus(ps *os.ProcessState, _ error) ExitStatus {
	if ps == nil {
		return ExitStatus{Code: -1}
	}
	return ExitStatus{Code: ps.ExitCode()}
}

func isExecutable(fs.FileInfo) bool { return true }
