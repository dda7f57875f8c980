//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestPlanReadsSplitsOnlyWhereNeeded(t *testing.T) {
	read, list, err := planReads(DefaultReadOnlyRoots, FilteredRoots)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d read rules, %d list-only directories", len(read), len(list))
	for _, p := range read {
		if p == "/etc" || p == "/etc/shadow" || p == "/etc/gshadow" {
			t.Errorf("read rule for %s", p)
		}
	}
	has := map[string]bool{}
	for _, p := range read {
		has[p] = true
	}
	for _, p := range []string{"/usr", "/etc/passwd", "/etc/hosts"} {
		if !has[p] {
			t.Errorf("no read rule for %s", p)
		}
	}
}

func TestIsSecretName(t *testing.T) {
	for rel, want := range map[string]bool{
		"shadow": true, "ssh/ssh_host_rsa_key": true, "ssh/ssh_host_rsa_key.pub": false,
		"sudoers.d/x": true, "ssh": false, "passwd": false, "security/opasswd": true,
		"ssl/private/key.pem": true, "ssl/certs": false,
	} {
		if got := isSecretName(rel); got != want {
			t.Errorf("isSecretName(%q) = %v, want %v", rel, got, want)
		}
	}
}

func BenchmarkPlanReads(b *testing.B) {
	for b.Loop() {
		if _, _, err := planReads(DefaultReadOnlyRoots, FilteredRoots); err != nil {
			b.Fatal(err)
		}
	}
}

func TestStaleLeavesRemoved(t *testing.T) {
	s := detectCgroup()
	if s.mode == cgNone {
		t.Skipf("no cgroup: %s", s.why)
	}
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	// pid_max itself is never a pid, so this leaf's owner is certainly gone.
	stale := filepath.Join(s.base, fmt.Sprintf("toolgate-sandbox-%s-test", strings.TrimSpace(string(b))))
	mine := filepath.Join(s.base, fmt.Sprintf("toolgate-sandbox-%d-test", os.Getpid()))
	for _, d := range []string{stale, mine} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	defer os.Remove(mine)
	defer os.Remove(stale)
	removeStaleLeaves(s.base)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale leaf %s not removed: %v", stale, err)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("a live process's leaf was removed: %v", err)
	}
}

func TestPlanReadsFilteredRootEdgeCases(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]os.FileMode{"pub": 0o644, "secret": 0o600} {
		if err := os.WriteFile(filepath.Join(real, name), nil, mode); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "etc")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	// A filtered root that is a link is walked through the link, never granted whole.
	read, list, err := planReads([]string{link}, []string{link})
	if err != nil {
		t.Fatal(err)
	}
	if len(read) != 1 || read[0] != filepath.Join(real, "pub") || len(list) != 1 || list[0] != real {
		t.Errorf("read %v list %v", read, list)
	}
	// A secret named directly as a root under a filtered root is not granted.
	read, _, err = planReads([]string{filepath.Join(real, "secret"), filepath.Join(real, "pub")}, []string{real})
	if err != nil {
		t.Fatal(err)
	}
	if len(read) != 1 || read[0] != filepath.Join(real, "pub") {
		t.Errorf("read %v", read)
	}
	// A root containing a filtered root is refused; a missing one is skipped.
	if _, _, err := planReads([]string{dir}, []string{real}); err == nil {
		t.Errorf("a root containing the filtered root was accepted")
	}
	if read, list, err := planReads([]string{filepath.Join(dir, "missing")}, []string{filepath.Join(dir, "missing")}); err != nil || len(read)+len(list) != 0 {
		t.Errorf("missing filtered root: %v %v %v", read, list, err)
	}
}

func TestPlanReadsLinkedRootExposingFilteredRootRefused(t *testing.T) {
	dir := t.TempDir()
	etc := filepath.Join(dir, "etc")
	if err := os.Mkdir(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	host := filepath.Join(t.TempDir(), "host")
	if err := os.Symlink(dir, host); err != nil {
		t.Fatal(err)
	}
	if _, _, err := planReads([]string{host}, []string{etc}); err == nil {
		t.Errorf("a link to a directory containing the filtered root was accepted")
	}
}

// TestCloneIntoV2Leaf exercises the cgroup v2 placement (CLONE_INTO_CGROUP together
// with the sandbox's namespaces) on any v2 hierarchy toolgate can create a child in,
// even one without the pids and memory controllers (as on the development machine,
// where the limits themselves therefore cannot be tested).
func TestCloneIntoV2Leaf(t *testing.T) {
	if c := Probe(); !c.Available {
		t.Skipf("sandbox unavailable: %s", c.Reason)
	}
	own, err := ownCgroups()
	if err != nil {
		t.Fatal(err)
	}
	v2, _, err := cgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	p, ok := own[""]
	if !ok || v2.dir == "" {
		t.Skip("no cgroup v2 hierarchy")
	}
	base, err := underMount(v2, p)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, fmt.Sprintf("toolgate-sandbox-%d-clonetest", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot create a v2 cgroup here: %v", err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(dir)
		t.Fatal(err)
	}
	leaf := &cgroupLeaf{dir: dir, mode: cgV2, fd: fd}
	defer func() {
		leaf.remove()
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("leaf %s not removed: %v", dir, err)
		}
	}()
	var out, errOut strings.Builder
	ws := t.TempDir()
	id := currentIdentity()
	ms, err := prepareMounts(id, []string{ws}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.close()
	cfg := helperConfig{Mode: "exec", Argv: []string{"/bin/cat", "/proc/self/cgroup"},
		Env: []string{"PATH=/usr/bin:/bin"}, Dir: ws, NewNet: true, MountProc: true, DropCaps: true, Attach: ms.attach}
	state, setupErr, err := runHelper(t.Context(), helperRun{cfg: cfg, flags: cloneFlags(true), id: id, leaf: leaf,
		extra: ms.files, stdout: &out, stderr: &errOut})
	if err != nil || setupErr != "" || !state.Success() {
		t.Fatalf("helper: %v %q %v (stderr %q)", err, setupErr, state, errOut.String())
	}
	rel, _ := filepath.Rel(v2.dir, dir)
	if want := "0::/" + rel + "\n"; !strings.Contains(out.String(), want) {
		t.Errorf("/proc/self/cgroup inside = %q, want a line %q", out.String(), want)
	}
}

// TestMetadataLayersHoldAlone shows that each of the two metadata layers refuses chmod,
// chown, utimensat, xattrs, truncate, mknod, link and rename of a root-owned file
// outside the workspace on its own (defence in depth), with no Landlock domain: the
// read-only mounts alone (the sandbox's uid mapped to the host's root, as before),
// and the unprivileged uid alone (no read-only pass). Control: with neither, as the
// sandbox was, the same calls succeed. Needs toolgate running as the host's root.
func TestMetadataLayersHoldAlone(t *testing.T) {
	if c := Probe(); !c.Available {
		t.Skipf("sandbox unavailable: %s", c.Reason)
	}
	if !hostRoot() {
		t.Skip("needs the host's root: the unprivileged uid is one of the layers under test")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "toolgate-layers-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	asRoot := identity{uid: 0, gid: 0}
	for _, c := range []struct {
		name    string
		id      identity
		roMount bool
		refused bool
	}{
		{"neither layer (control)", asRoot, false, false},
		{"read-only mounts alone", asRoot, true, true},
		{"unprivileged uid alone", currentIdentity(), false, true},
	} {
		target := filepath.Join(dir, "victim")
		os.Remove(target) // the control changed its mode
		if err := os.WriteFile(target, []byte("v\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := unix.Setxattr(target, "user.toolgate_keep", []byte("k"), 0); err != nil {
			t.Skipf("user xattrs unsupported here: %v", err)
		}
		ms, err := prepareMounts(c.id, nil, []string{filepath.Dir(exe)})
		if err != nil {
			t.Fatal(err)
		}
		cfg := helperConfig{Mode: "exec", Argv: []string{exe, "x:" + target}, Env: []string{"TOOLGATE_METADATA_PROBE=1"},
			MountProc: true, DropCaps: true, ReadOnlyMounts: c.roMount, Attach: ms.attach}
		var out, errOut strings.Builder
		state, setupErr, err := runHelper(t.Context(), helperRun{cfg: cfg, flags: cloneFlags(true), id: c.id,
			extra: ms.files, stdout: &out, stderr: &errOut})
		ms.close()
		if err != nil || setupErr != "" || !state.Success() {
			t.Fatalf("%s: helper: %v %q %v (stderr %q)", c.name, err, setupErr, state, errOut.String())
		}
		t.Logf("%s: %s", c.name, out.String())
		fields := strings.Fields(out.String())
		if len(fields) < 20 {
			t.Fatalf("%s: prober output %q", c.name, out.String())
		}
		for _, kv := range fields[1:] {
			op, errno, _ := strings.Cut(kv, "=")
			if op == "open_write" {
				continue // data, not metadata: Landlock's, absent here
			}
			if ok := errno == "0"; ok == c.refused {
				t.Errorf("%s: %s gave errno %s", c.name, op, errno)
			}
		}
		for _, n := range []string{"probe-fifo", "probe-reg", "probe-link", "victim.renamed"} {
			os.Remove(filepath.Join(dir, n))
		}
	}
}

// BenchmarkPrepareMounts is the per-call cost toolgate pays, as root, for the
// id-mapped mounts of a workspace and a scratch directory (under a private parent,
// so a read-only cover is made too): open_tree and mount_setattr for each.
func BenchmarkPrepareMounts(b *testing.B) {
	id := currentIdentity()
	if !id.remapped {
		b.Skip("only toolgate as the host's root makes id-mapped mounts")
	}
	if _, err := idmapUserNS(); err != nil {
		b.Skip(err)
	}
	ws, scratch := b.TempDir(), b.TempDir()
	for b.Loop() {
		ms, err := prepareMounts(id, []string{ws, scratch}, DefaultReadOnlyRoots)
		if err != nil {
			b.Fatal(err)
		}
		if len(ms.attach) != 3 {
			b.Fatalf("attach = %+v", ms.attach)
		}
		ms.close()
	}
}
