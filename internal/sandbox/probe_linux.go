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
	id := currentIdentity()
	c := Capabilities{LandlockABI: LandlockABI(), Rlimits: rlimitsText(), Identity: id.describe()}
	cg := cgroupOnce()
	try := func(flags uintptr, cfg helperConfig, leaf *cgroupLeaf) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cfg.Mode = "probe"
		cfg.Env = []string{"PATH=/usr/bin:/bin"}
		run := helperRun{cfg: cfg, flags: flags, id: id, leaf: leaf, stdout: io.Discard, stderr: io.Discard}
		if cfg.ReadOnlyMounts {
			// Detached mounts are used up by the helper that attaches them: fresh ones
			// for every start, exactly as Run makes them.
			ms, err := prepareMounts(id, cfg.Writable, DefaultReadOnlyRoots)
			if err != nil {
				return err
			}
			defer ms.close()
			run.cfg.Attach, run.extra = ms.attach, ms.files
		}
		state, setupErr, err := runHelper(ctx, run)
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
	c.UserNS = note("user namespace", explainExec(id, try(user, helperConfig{}, nil)))
	if c.UserNS {
		c.PIDNS = note("PID namespace", try(user|syscall.CLONE_NEWPID, helperConfig{}, nil))
		c.MountNS = note("mount namespace with a private /proc",
			try(user|syscall.CLONE_NEWPID|syscall.CLONE_NEWNS, helperConfig{MountProc: true}, nil))
		c.NetNS = note("network namespace", try(user|syscall.CLONE_NEWNET, helperConfig{NewNet: true}, nil))
	}
	if c.LandlockABI < 1 {
		note("landlock", fmt.Errorf("not available in this kernel (needs Linux 5.13+ with landlock enabled in the LSM list)"))
	}
	if firstErr == nil {
		// Everything together, exactly as Run does it.
		dir, err := os.MkdirTemp("", "toolgate-probe-")
		var full helperConfig
		if err == nil {
			defer os.RemoveAll(dir)
			full = helperConfig{
				Dir: dir, NewNet: true, MountProc: true, Landlock: true, DropCaps: true,
				Writable: []string{dir}, ReadOnlyMounts: true,
			}
			full.ReadOnly, full.ReadDirOnly, err = planReads(DefaultReadOnlyRoots, FilteredRoots)
		}
		inLeaf := func(cfg helperConfig) error {
			leaf, err := cg.newLeaf(DefaultMaxProcesses, DefaultMaxMemory)
			if err != nil {
				return err
			}
			defer leaf.remove()
			return try(cloneFlags(true), cfg, leaf)
		}
		// Everything at once first (one helper start, which matters because the helper is
		// this whole binary); only if that fails is each optional layer tried alone, so
		// the required layers are never refused for an optional one's sake.
		all := full
		all.Seccomp = true
		if err == nil && cg.mode != cgNone && inLeaf(all) == nil {
			c.seccompOK, c.cgroupOK = true, true
		} else if err == nil {
			err = try(cloneFlags(true), full, nil)
			if err == nil {
				if serr := try(cloneFlags(true), all, nil); serr != nil {
					c.Seccomp = "none: " + serr.Error()
				} else {
					c.seccompOK = true
				}
				if cg.mode != cgNone {
					// Only a helper started in a leaf makes the cgroup limits promised.
					if lerr := inLeaf(full); lerr != nil {
						cg = cgroupSetup{why: fmt.Sprintf("none: starting a confined helper in a %s leaf failed: %v", cg.why, lerr)}
					} else {
						c.cgroupOK = true
					}
				}
			}
		}
		note("full confinement", err)
		c.ReadOnlyMounts = err == nil
		if c.seccompOK {
			c.Seccomp = seccompText
		}
	}
	if !c.cgroupOK && cg.mode != cgNone {
		cg = cgroupSetup{why: "none: the sandbox itself is unavailable"}
	}
	c.Cgroup = cg.why
	c.ProcessLimit = processLimitText(cg)
	c.MemoryLimit = memoryLimitText(cg)
	if firstErr != nil {
		c.Reason = firstErr.Error()
	} else {
		c.Available = true
	}
	return c
}

// explainExec adds the likely cause to a failure to start the helper as SandboxUID:
// the helper is toolgate's own executable, run as that uid, so it must be executable
// by others.
func explainExec(id identity, err error) error {
	if err == nil || !id.remapped {
		return err
	}
	if fi, serr := os.Stat("/proc/self/exe"); serr == nil && fi.Mode().Perm()&0o001 == 0 {
		exe, _ := os.Executable()
		return fmt.Errorf("%v (toolgate's executable %s has mode %04o: the sandbox's helper is that executable run as uid %d, so it must be executable by others: chmod o+rx)", err, exe, fi.Mode().Perm(), id.uid)
	}
	return err
}
