//go:build linux

package sandbox

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// leafPollInterval is how often a call's cgroup is checked for a refused fork. The
// kernel already refuses the fork at pids.max; the check only ends the call promptly
// instead of letting a fork loop spin until the timeout.
const leafPollInterval = 25 * time.Millisecond

// minProcesses is the smallest process limit applied: the helper (a Go program with a
// handful of threads) runs in the call's cgroup before it execs the command, and
// would crash if it could not start its own threads.
const minProcesses = 16

// limits are one call's resource limits, defaults applied.
type limits struct {
	procs    int
	memory   int64
	fileSize int64
	files    int
	cpuSecs  uint64
}

func limitsFor(spec Spec, timeout time.Duration) limits {
	l := limits{procs: spec.MaxProcesses, memory: spec.MaxMemory, fileSize: spec.MaxFileSize, files: spec.MaxOpenFiles}
	if l.procs <= 0 {
		l.procs = DefaultMaxProcesses
	}
	if l.procs < minProcesses {
		l.procs = minProcesses
	}
	if l.memory <= 0 {
		l.memory = DefaultMaxMemory
	}
	if l.fileSize <= 0 {
		l.fileSize = DefaultMaxFileSize
	}
	if l.files <= 0 {
		l.files = DefaultMaxOpenFiles
	}
	// CPU seconds per process: the whole timeout, rounded up, plus one. A process can
	// only reach it by using more than one core for most of the call; the soft limit
	// sends SIGXCPU, the hard one a second later SIGKILL.
	l.cpuSecs = uint64((timeout+time.Second-1)/time.Second) + 1
	return l
}

// rlimits are the limits the helper sets right before execve. Soft and hard are equal
// (except CPU, whose hard limit follows the soft one by a second), so the command
// cannot raise them. RLIMIT_AS is set only when no cgroup bounds memory: it is per
// process and breaks programs that reserve large address ranges.
func (l limits) rlimits(leaf *cgroupLeaf) []rlimit {
	fixed := func(res int, v uint64) rlimit { return rlimit{Resource: res, Cur: v, Max: v} }
	nproc := uint64(l.procs)
	if leaf != nil {
		// The leaf's pids.max is what refuses a fork, which toolgate sees and then stops
		// the call. The kernel checks RLIMIT_NPROC first, and a fork it refuses leaves no
		// trace in the cgroup, so a fork loop would spin until the timeout: the rlimit
		// stays above pids.max, a backstop only.
		nproc *= 2
	}
	rl := []rlimit{
		{Resource: unix.RLIMIT_CPU, Cur: l.cpuSecs, Max: l.cpuSecs + 1},
		fixed(unix.RLIMIT_FSIZE, uint64(l.fileSize)),
		fixed(unix.RLIMIT_NOFILE, uint64(l.files)),
		fixed(unix.RLIMIT_CORE, 0),
		fixed(unix.RLIMIT_NPROC, nproc),
	}
	if leaf == nil || leaf.mode != cgV2 {
		rl = append(rl, fixed(unix.RLIMIT_AS, uint64(l.memory)))
	}
	return rl
}

// applyRlimits sets rl on the calling process; used by the helper just before execve.
func applyRlimits(rl []rlimit) error {
	for _, r := range rl {
		if err := unix.Setrlimit(r.Resource, &unix.Rlimit{Cur: r.Cur, Max: r.Max}); err != nil {
			return fmt.Errorf("setting resource limit %d to %d/%d: %w", r.Resource, r.Cur, r.Max, err)
		}
	}
	return nil
}

// watchLeaf calls stop once the leaf's pids.max has refused a fork. The returned
// function ends the watch and reports whether that happened.
func watchLeaf(leaf *cgroupLeaf, stop func()) func() bool {
	if leaf == nil {
		return func() bool { return false }
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var hit bool
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(leafPollInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if leaf.pidsLimitHit() {
					hit = true
					stop()
					return
				}
			}
		}
	}()
	return func() bool {
		close(done)
		wg.Wait()
		// A fork refused in the last interval still counts.
		return hit || leaf.pidsLimitHit()
	}
}

var cgroupOnce = sync.OnceValue(detectCgroup)

// cgroup is the cgroup setup calls use: what detectCgroup found, unless the probe
// could not start a confined helper in it (then none).
func cgroup() cgroupSetup {
	c := Probe()
	if !c.cgroupOK {
		return cgroupSetup{}
	}
	return cgroupOnce()
}

// processLimitText and memoryLimitText describe, for Capabilities, what bounds a call.
func processLimitText(s cgroupSetup) string {
	if s.mode != cgNone {
		return fmt.Sprintf("cgroup pids.max (default %d per call); reaching it stops the call", DefaultMaxProcesses)
	}
	// (The kernel never enforces RLIMIT_NPROC for the host's root; commands never run as
	// it: see SandboxUID.)
	return fmt.Sprintf("RLIMIT_NPROC (default %d; counted per user namespace, so only the call's own processes count)", DefaultMaxProcesses)
}

func memoryLimitText(s cgroupSetup) string {
	if s.mode == cgV2 {
		return fmt.Sprintf("cgroup memory.max (default %d MiB per call, no swap); the kernel's OOM killer acts inside the call only", DefaultMaxMemory>>20)
	}
	return fmt.Sprintf("RLIMIT_AS per process (default %d MiB of address space); a call's total is not bounded", DefaultMaxMemory>>20)
}

func rlimitsText() string {
	return fmt.Sprintf("RLIMIT_CPU=timeout+1s, RLIMIT_FSIZE=%d MiB, RLIMIT_NOFILE=%d, RLIMIT_CORE=0, RLIMIT_NPROC=process limit (twice it under a cgroup, which then binds first), RLIMIT_AS=memory limit unless a v2 cgroup bounds memory",
		DefaultMaxFileSize>>20, DefaultMaxOpenFiles)
}
