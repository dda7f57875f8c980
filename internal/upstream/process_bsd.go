//go:build unix && !linux

package upstream

import (
	"os/exec"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr {
	// Setpgid only: there is no parent-death signal outside Linux.
	return &syscall.SysProcAttr{Setpgid: true}
}

func spawn(cmd *exec.Cmd) error { return cmd.Start() }

func groupAlive(pgid int) bool { return groupAliveBySignal(pgid) }
