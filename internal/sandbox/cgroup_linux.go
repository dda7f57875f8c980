//go:build linux

package sandbox

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupMode says how each call is placed in a cgroup of its own.
type cgroupMode int

const (
	// cgNone: no usable cgroup; rlimits are all there is.
	cgNone cgroupMode = iota
	// cgV2: a leaf in toolgate's own cgroup v2 with pids.max and memory.max; the helper
	// is cloned straight into it (CLONE_INTO_CGROUP), so not one instruction runs
	// outside it.
	cgV2
	// cgV1Pids: a leaf in toolgate's cgroup of a v1 pids hierarchy. v1 has no
	// CLONE_INTO_CGROUP, so the helper is moved in before it is sent its configuration:
	// it reads that configuration before doing anything else, so nothing it runs, and no
	// process it could fork, starts outside the leaf.
	cgV1Pids
)

// cgroupSetup is where leaves are created, found by detectCgroup.
type cgroupSetup struct {
	mode cgroupMode
	base string
	// why explains cgNone, or names the hierarchy used.
	why string
}

// mountPoint is one cgroup mount from /proc/self/mountinfo.
type mountPoint struct{ dir, root string }

// detectCgroup finds a cgroup hierarchy where toolgate can create a leaf per call with
// a process limit: v2 with the pids and memory controllers available to children of
// toolgate's own cgroup, else a v1 pids hierarchy. It proves it by creating (and
// removing) a leaf and setting its limits; it never changes the hierarchy's own
// settings (subtree_control), which belong to whoever delegated it.
func detectCgroup() cgroupSetup {
	own, err := ownCgroups()
	if err != nil {
		return cgroupSetup{why: fmt.Sprintf("none: reading /proc/self/cgroup: %v", err)}
	}
	v2mnt, pidsMnt, err := cgroupMounts()
	if err != nil {
		return cgroupSetup{why: fmt.Sprintf("none: reading /proc/self/mountinfo: %v", err)}
	}
	var reasons []string
	if p, ok := own[""]; ok && v2mnt.dir != "" {
		base, err := underMount(v2mnt, p)
		if err == nil {
			err = tryLeaf(cgroupSetup{mode: cgV2, base: base})
		}
		if err == nil {
			removeStaleLeaves(base)
			return cgroupSetup{mode: cgV2, base: base, why: "v2: a leaf per call under " + base + " (pids.max, memory.max, memory.swap.max=0)"}
		}
		reasons = append(reasons, fmt.Sprintf("v2 at %s not usable: %v", v2mnt.dir, err))
	} else {
		reasons = append(reasons, "no cgroup v2 hierarchy")
	}
	if p, ok := own["pids"]; ok && pidsMnt.dir != "" {
		base, err := underMount(pidsMnt, p)
		if err == nil {
			err = tryLeaf(cgroupSetup{mode: cgV1Pids, base: base})
		}
		if err == nil {
			removeStaleLeaves(base)
			return cgroupSetup{mode: cgV1Pids, base: base, why: "v1 pids: a leaf per call under " + base + " (pids.max; no memory cgroup); " + strings.Join(reasons, "; ")}
		}
		reasons = append(reasons, fmt.Sprintf("v1 pids at %s not usable: %v", pidsMnt.dir, err))
	} else {
		reasons = append(reasons, "no v1 pids hierarchy")
	}
	return cgroupSetup{why: "none: " + strings.Join(reasons, "; ")}
}

// ownCgroups maps controller name ("" for v2) to this process's cgroup path.
func ownCgroups() (map[string]string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, nil
}

// cgroupMounts finds the cgroup2 mount and the v1 mount carrying the pids controller.
func cgroupMounts() (v2, pids mountPoint, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return v2, pids, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f1, f2 := strings.Fields(pre), strings.Fields(post)
		if len(f1) < 5 || len(f2) < 3 {
			continue
		}
		m := mountPoint{dir: unescapeMount(f1[4]), root: unescapeMount(f1[3])}
		switch f2[0] {
		case "cgroup2":
			if v2.dir == "" {
				v2 = m
			}
		case "cgroup":
			for _, o := range strings.Split(f2[2], ",") {
				if o == "pids" && pids.dir == "" {
					pids = m
				}
			}
		}
	}
	return v2, pids, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// underMount is the directory of cgroup path p in mount m.
func underMount(m mountPoint, p string) (string, error) {
	rel := p
	if m.root != "/" {
		r, ok := strings.CutPrefix(p, m.root)
		if !ok {
			return "", fmt.Errorf("cgroup %s is outside the mounted part %s", p, m.root)
		}
		rel = r
	}
	dir := filepath.Join(m.dir, rel)
	if !strings.HasPrefix(dir, m.dir) {
		return "", fmt.Errorf("cgroup path %s escapes %s", p, m.dir)
	}
	return dir, nil
}

// removeStaleLeaves removes empty leaves left by toolgate processes that died
// mid-call (their names carry the pid; a leaf of a live process is left alone, and
// rmdir refuses a leaf that still has processes).
func removeStaleLeaves(base string) {
	m, _ := filepath.Glob(filepath.Join(base, "toolgate-sandbox-*-*"))
	for _, dir := range m {
		rest := strings.TrimPrefix(filepath.Base(dir), "toolgate-sandbox-")
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
			continue
		}
		_ = unix.Rmdir(dir)
	}
}

// tryLeaf creates a leaf with limits and removes it.
func tryLeaf(s cgroupSetup) error {
	l, err := s.newLeaf(1, 1<<30)
	if err != nil {
		return err
	}
	l.remove()
	return nil
}

// cgroupLeaf is one call's cgroup.
type cgroupLeaf struct {
	dir  string
	mode cgroupMode
	fd   int // v2: the directory, for CLONE_INTO_CGROUP; -1 otherwise
}

// newLeaf creates a leaf with pids.max (and, on v2, memory.max) set.
func (s cgroupSetup) newLeaf(maxProcs int, maxMem int64) (*cgroupLeaf, error) {
	if s.mode == cgNone {
		return nil, nil
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	dir := filepath.Join(s.base, fmt.Sprintf("toolgate-sandbox-%d-%s", os.Getpid(), hex.EncodeToString(b)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating cgroup %s: %w", dir, err)
	}
	l := &cgroupLeaf{dir: dir, mode: s.mode, fd: -1}
	fail := func(err error) (*cgroupLeaf, error) {
		l.remove()
		return nil, err
	}
	want := []string{"pids.max"}
	if s.mode == cgV2 {
		want = append(want, "memory.max")
	}
	for _, f := range want {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return fail(fmt.Errorf("no %s in a child of %s (the controller is not enabled in its cgroup.subtree_control)", f, s.base))
		}
	}
	if err := l.write("pids.max", strconv.Itoa(maxProcs)); err != nil {
		return fail(err)
	}
	if s.mode == cgV2 {
		if err := l.write("memory.max", strconv.FormatInt(maxMem, 10)); err != nil {
			return fail(err)
		}
		// Without a swap limit a hog would page out instead of being stopped. The file
		// is absent where swap accounting is off (then there is no swap to limit).
		if _, err := os.Stat(filepath.Join(dir, "memory.swap.max")); err == nil {
			if err := l.write("memory.swap.max", "0"); err != nil {
				return fail(err)
			}
		}
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fail(fmt.Errorf("opening cgroup %s: %w", dir, err))
		}
		l.fd = fd
	}
	return l, nil
}

func (l *cgroupLeaf) write(file, value string) error {
	if err := os.WriteFile(filepath.Join(l.dir, file), []byte(value), 0); err != nil {
		return fmt.Errorf("setting %s in cgroup %s: %w", file, l.dir, err)
	}
	return nil
}

// enter moves pid into a v1 leaf (v2 leaves are entered at clone time).
func (l *cgroupLeaf) enter(pid int) error {
	if l == nil || l.mode != cgV1Pids {
		return nil
	}
	return l.write("cgroup.procs", strconv.Itoa(pid))
}

// counter reads "key N" from a flat-keyed cgroup file; 0 when absent.
func (l *cgroupLeaf) counter(file, key string) int64 {
	data, err := os.ReadFile(filepath.Join(l.dir, file))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// pidsLimitHit reports whether a fork or clone was refused by pids.max.
func (l *cgroupLeaf) pidsLimitHit() bool { return l.counter("pids.events", "max") > 0 }

// oomKilled reports whether the leaf's memory.max made the kernel kill a process.
func (l *cgroupLeaf) oomKilled() bool {
	return l.mode == cgV2 && l.counter("memory.events", "oom_kill") > 0
}

// remove kills anything left (v2) and deletes the leaf. By the time Run calls it the
// PID namespace's init has been reaped, which means every process in it is gone; the
// retries cover the kernel finishing its bookkeeping.
func (l *cgroupLeaf) remove() {
	if l == nil {
		return
	}
	if l.fd >= 0 {
		unix.Close(l.fd)
		l.fd = -1
	}
	if l.mode == cgV2 {
		_ = l.write("cgroup.kill", "1")
	}
	for i := 0; i < 100; i++ {
		err := unix.Rmdir(l.dir)
		if err == nil || errors.Is(err, unix.ENOENT) || !errors.Is(err, unix.EBUSY) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
