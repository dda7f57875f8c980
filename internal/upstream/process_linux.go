package upstream

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr {
	// Setpgid: the server and everything it starts form one group that Stop can
	// signal as a whole. Pdeathsig: if toolgate dies without stopping it, the
	// kernel kills the leader (its group is then cleaned by nobody, which is why
	// Stop, not death, is the normal path).
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// spawner starts every process from one goroutine locked to its OS thread for
// the life of the program. Linux sends the parent-death signal when the thread
// that forked the child exits (go.dev/issue/27505), and the Go runtime may end
// threads; a thread that is never unlocked is never ended.
var spawner struct {
	once sync.Once
	reqs chan spawnReq
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

func spawn(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: this thread must outlive every child
			for r := range spawner.reqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawner.reqs <- spawnReq{cmd: cmd, done: done}
	return <-done
}

// groupAlive reports whether a process of the group pgid is still running. A
// zombie does not count: an orphan whose reaper (the init of a container, say)
// never reaps it stays a zombie for ever, and it holds nothing.
func groupAlive(pgid int) bool {
	if !groupAliveBySignal(pgid) {
		return false
	}
	dir, err := os.Open("/proc")
	if err != nil {
		return true
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return true
	}
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		stat, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(stat[i+1:])
		if len(f) < 3 {
			continue
		}
		if g, err := strconv.Atoi(string(f[2])); err == nil && g == pgid && f[0][0] != 'Z' && f[0][0] != 'X' {
			return true
		}
	}
	return false
}
