//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"
)

var probeOnce = sync.OnceValue(probe)

// Probe reports what confinement this machine provides. The first call starts a few
// short-lived helpers; the result is cached for the life of the process.
func Probe() Capabilities { return probeOnce() }

func probe() Capabilities {
	c := Capabilities{LandlockABI: LandlockABI(), Cgroup: cgroupKind()}
	try := func(flags uintptr, cfg helperConfig) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cfg.Mode = "probe"
		cfg.Env = []string{"PATH=/usr/bin:/bin"}
		state, setupErr, err := runHelper(ctx, cfg, flags, io.Discard, io.Discard)
		if err != nil {
			return err
		}
		if setupErr != "" {
			return fmt.Errorf("%s", setupErr)
		}
		if !state.Success() {
			return fmt.Errorf("probe helper exited with %v", state)
		}
		return nil
	}
	user := uintptr(syscall.CLONE_NEWUSER)
	var firstErr error
	note := func(what string, err error) bool {
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("%s: %v", what, err)
		}
		return err == nil
	}
	c.UserNS = note("user namespace", try(user, helperConfig{}))
	if c.UserNS {
		c.PIDNS = note("PID namespace", try(user|syscall.CLONE_NEWPID, helperConfig{}))
		c.MountNS = note("mount namespace with a private /proc",
			try(user|syscall.CLONE_NEWPID|syscall.CLONE_NEWNS, helperConfig{MountProc: true}))
		c.NetNS = note("network namespace", try(user|syscall.CLONE_NEWNET, helperConfig{NewNet: true}))
	}
	if c.LandlockABI < 1 {
		note("landlock", fmt.Errorf("not available in this kernel (needs Linux 5.13+ with landlock enabled in the LSM list)"))
	}
	if firstErr == nil {
		// Everything together, exactly as Run does it.
		dir, err := os.MkdirTemp("", "toolgate-probe-")
		if err == nil {
			defer os.RemoveAll(dir)
			err = try(cloneFlags(true), helperConfig{
				Dir: dir, NewNet: true, MountProc: true, Landlock: true, DropCaps: true,
				ReadOnly: DefaultReadOnlyRoots, Writable: []string{dir},
			})
		}
		note("full confinement", err)
	}
	if firstErr != nil {
		c.Reason = firstErr.Error()
	} else {
		c.Available = true
	}
	return c
}

// cgroupKind describes the cgroup hierarchy for status output.
func cgroupKind() string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return "v2 (unified); not used for confinement"
	}
	if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.controllers"); err == nil {
		return "v1 with a v2 hierarchy at /sys/fs/cgroup/unified; not used for confinement"
	}
	if _, err := os.Stat("/sys/fs/cgroup"); err == nil {
		return "v1; not used for confinement"
	}
	return "none"
}
