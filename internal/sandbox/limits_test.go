//go:build linux

package sandbox_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/sandbox"
)

// leftoverLeaves lists cgroup leaves this test process created that still exist.
func leftoverLeaves(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, pat := range []string{"/sys/fs/cgroup/toolgate-sandbox-%d-*", "/sys/fs/cgroup/*/toolgate-sandbox-%d-*", "/sys/fs/cgroup/*/*/toolgate-sandbox-%d-*", "/sys/fs/cgroup/*/*/*/toolgate-sandbox-%d-*"} {
		m, _ := filepath.Glob(fmt.Sprintf(pat, os.Getpid()))
		out = append(out, m...)
	}
	return out
}

func TestDefaultRlimits(t *testing.T) {
	requireSandbox(t)
	spec := bash(t.TempDir(), `echo f=$(ulimit -f) n=$(ulimit -n) c=$(ulimit -c) t=$(ulimit -t) u=$(ulimit -u) v=$(ulimit -v) Hn=$(ulimit -Hn) Ht=$(ulimit -Ht)`)
	res := run(t, spec)
	v := "unlimited"
	if strings.HasPrefix(sandbox.Probe().MemoryLimit, "RLIMIT_AS") {
		v = fmt.Sprint(sandbox.DefaultMaxMemory / 1024)
	}
	// Timeout 20 s: CPU soft limit 21 s, hard 22 s.
	u := sandbox.DefaultMaxProcesses
	if strings.HasPrefix(sandbox.Probe().ProcessLimit, "cgroup") {
		u *= 2 // a backstop above pids.max, which binds first
	}
	want := fmt.Sprintf("f=%d n=%d c=0 t=21 u=%d v=%s Hn=%d Ht=22\n", sandbox.DefaultMaxFileSize/1024,
		sandbox.DefaultMaxOpenFiles, u, v, sandbox.DefaultMaxOpenFiles)
	if got := string(res.Stdout); got != want {
		t.Errorf("limits = %q, want %q (stderr %q)", got, want, res.Stderr)
	}
	// The command cannot raise them (hard = soft, no CAP_SYS_RESOURCE).
	res = run(t, bash(t.TempDir(), `ulimit -n 8192 && echo RAISED-N; ulimit -f unlimited && echo RAISED-F; true`))
	if strings.Contains(string(res.Stdout), "RAISED") {
		t.Errorf("a limit was raised: %s", res.Stdout)
	}
}

func TestFileSizeCap(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	spec := bash(ws, `dd if=/dev/zero of=small bs=64k count=8 2>/dev/null && echo small-ok
dd if=/dev/zero of=big bs=64k count=32 2>/dev/null; echo "dd exit $?"`)
	spec.MaxFileSize = 1 << 20
	res := run(t, spec)
	out := string(res.Stdout)
	if !strings.Contains(out, "small-ok") {
		t.Errorf("control: a file under the cap was not written: %q %q", out, res.Stderr)
	}
	// 128+SIGXFSZ(25) = 153: dd was stopped by the file-size limit.
	if !strings.Contains(out, "dd exit 153") {
		t.Errorf("dd past the cap did not fail with SIGXFSZ: %q %q", out, res.Stderr)
	}
	fi, err := os.Stat(filepath.Join(ws, "big"))
	if err != nil || fi.Size() != 1<<20 {
		t.Errorf("big file: %v, size %d, want exactly the 1 MiB cap", err, fi.Size())
	}
}

func TestForkBombStopped(t *testing.T) {
	requireSandbox(t)
	c := sandbox.Probe()
	if !strings.HasPrefix(c.ProcessLimit, "cgroup") {
		t.Skipf("no cgroup process limit on this machine: %s", c.ProcessLimit)
	}
	mark := marker(t)
	// The classic bomb, kept alive by wait (otherwise bash, the namespace init, returns
	// at once and the PID namespace ends it anyway). The marker is in every bash's argv.
	spec := bash(t.TempDir(), `: `+mark+`
bomb() { bomb | bomb & }; bomb; wait; sleep 1000`)
	spec.MaxProcesses = 64
	spec.Timeout = 120 * time.Second
	res := run(t, spec)
	if res.LimitExceeded != "processes" || res.TimedOut {
		t.Errorf("fork bomb: LimitExceeded=%q TimedOut=%v signal=%q (want processes, stopped before the timeout)", res.LimitExceeded, res.TimedOut, res.Signal)
	}
	if procHasMarker(mark) {
		t.Errorf("fork bomb processes survived the call")
	}
	if l := leftoverLeaves(t); len(l) != 0 {
		t.Errorf("cgroup leaves left behind: %v", l)
	}
}

func TestManyProcessesUnderTheLimitRun(t *testing.T) {
	requireSandbox(t)
	// 40 concurrent sleeps under a limit of 64: nothing is refused.
	spec := bash(t.TempDir(), `for i in $(seq 40); do sleep 0.2 & done; wait; echo all-done`)
	spec.MaxProcesses = 64
	res := run(t, spec)
	if string(res.Stdout) != "all-done\n" || res.LimitExceeded != "" {
		t.Errorf("stdout %q stderr %q limit %q", res.Stdout, res.Stderr, res.LimitExceeded)
	}
}

func TestMemoryHogStopped(t *testing.T) {
	requireSandbox(t)
	spec := bash(t.TempDir(), `x=$(head -c 32M /dev/zero | tr '\0' a); echo control ${#x}
x=x; while :; do x=$x$x; done`)
	spec.MaxMemory = 512 << 20
	spec.Timeout = 120 * time.Second
	res := run(t, spec)
	if !strings.Contains(string(res.Stdout), "control 33554432") {
		t.Errorf("control: 32 MiB under a 512 MiB cap failed: %q %q", res.Stdout, res.Stderr)
	}
	if res.TimedOut || res.ExitCode == 0 {
		t.Fatalf("memory hog not stopped by the limit: %+v stderr %q", res, res.Stderr)
	}
	switch {
	case res.LimitExceeded == "memory":
	case strings.Contains(string(res.Stderr), "cannot allocate"):
	default:
		t.Errorf("no clear memory-limit result: limit %q signal %q stderr %q", res.LimitExceeded, res.Signal, res.Stderr)
	}
	if l := leftoverLeaves(t); len(l) != 0 {
		t.Errorf("cgroup leaves left behind: %v", l)
	}
}

func TestEtcSecretsUnreadable(t *testing.T) {
	requireSandbox(t)
	script := `for f in /etc/shadow /etc/gshadow /etc/shadow- /etc/gshadow- /etc/sudoers /etc/ssh/ssh_host_*_key /etc/security/opasswd; do
  [ -e "$f" ] || continue; echo "exists $f"; head -c 1 "$f" >/dev/null 2>&1 && echo "READ $f"
done
grep -q '^root:' /etc/passwd && echo passwd-ok
cat /etc/hosts >/dev/null && echo hosts-ok
ls /etc/ssl/certs | grep -q . && echo ssl-list-ok
cat /etc/ssl/certs/ca-certificates.crt | grep -q BEGIN && echo ca-ok
ls /etc | grep -qx passwd && echo etc-list-ok
getent hosts localhost >/dev/null && echo resolve-ok
true`
	res := run(t, bash(t.TempDir(), script))
	out := string(res.Stdout)
	for _, want := range []string{"passwd-ok", "hosts-ok", "ssl-list-ok", "ca-ok", "etc-list-ok", "resolve-ok", "exists /etc/shadow"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in %q (stderr %q)", want, out, res.Stderr)
		}
	}
	if strings.Contains(out, "READ ") {
		t.Errorf("a secret under /etc was readable:\n%s", out)
	}
	// With /etc granted whole, toolgate as root: the sandbox's root used to own
	// /etc/shadow and read it (this was the control that the check above can fail).
	// Now the unprivileged uid is a second layer and refuses it on its own. The
	// filter's rule, the first layer, is proven where ownership does not stop the
	// read: TestFilteredRootRule.
	if os.Getuid() == 0 {
		spec := bash(t.TempDir(), script)
		spec.FilteredRoots = []string{}
		if res := run(t, spec); strings.Contains(string(res.Stdout), "READ /etc/shadow") {
			t.Errorf("with /etc granted whole, the sandbox's uid read /etc/shadow: %q", res.Stdout)
		}
	}
}

// TestFilteredRootRule checks the rule on a tree the test controls (this machine has
// no SSH host keys).
func TestFilteredRootRule(t *testing.T) {
	requireSandbox(t)
	root := t.TempDir()
	files := map[string]os.FileMode{
		"pub": 0o644, "secret": 0o600, "grp": 0o640,
		"ssh/ssh_config": 0o644, "ssh/ssh_host_ed25519_key": 0o644, "ssh/ssh_host_ed25519_key.pub": 0o644,
		"private/x": 0o644, "open/nested/f": 0o644, "sudoers.d/x": 0o644, "shadow": 0o644,
	}
	for name, mode := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("content-"+name), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "private"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("secret", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	script := `cd ` + root + `
for f in pub secret grp ssh/ssh_config ssh/ssh_host_ed25519_key ssh/ssh_host_ed25519_key.pub private/x open/nested/f sudoers.d/x shadow link; do
  cat "$f" >/dev/null 2>&1 && echo "read $f"
done
ls >/dev/null && echo "list"`
	spec := bash(t.TempDir(), script)
	spec.ReadOnlyRoots = append(append([]string{}, sandbox.DefaultReadOnlyRoots...), root)
	spec.FilteredRoots = []string{"/etc", root}
	res := run(t, spec)
	want := "read pub\nread ssh/ssh_config\nread ssh/ssh_host_ed25519_key.pub\nread open/nested/f\nlist\n"
	if got := string(res.Stdout); got != want {
		t.Errorf("filtered:\n%s\nwant:\n%s(stderr %q)", got, want, res.Stderr)
	}
	// Control: granted whole, everything is readable by the sandbox's uid (the owner).
	spec.FilteredRoots = []string{"/etc"}
	res = run(t, spec)
	if n := strings.Count(string(res.Stdout), "read "); n != 11 {
		t.Errorf("control: %d of 11 readable unfiltered: %s", n, res.Stdout)
	}
}

func TestReadOnlyRootExposingFilteredRootRefused(t *testing.T) {
	requireSandbox(t)
	spec := bash(t.TempDir(), "true")
	spec.ReadOnlyRoots = append(append([]string{}, sandbox.DefaultReadOnlyRoots...), "/")
	if _, err := sandbox.Run(t.Context(), spec); err == nil || !strings.Contains(err.Error(), "filtered root") {
		t.Errorf("err = %v, want a refusal naming the filtered root", err)
	}
}

// BenchmarkRunTrueEtcUnfiltered is BenchmarkRunTrue with /etc granted whole: the
// difference is the cost of walking /etc for the per-entry rules and of the cgroup leaf.
func BenchmarkRunTrueEtcUnfiltered(b *testing.B) {
	requireSandbox(b)
	ws := b.TempDir()
	spec := sandbox.Spec{Argv: []string{"/bin/bash", "--noprofile", "--norc", "-c", "true"}, Dir: ws, Env: baseEnv, FilteredRoots: []string{}}
	for b.Loop() {
		if res, err := sandbox.Run(b.Context(), spec); err != nil || res.ExitCode != 0 {
			b.Fatalf("%v %+v", err, res)
		}
	}
}

// TestNprocBindsForUnprivilegedUser checks the fallback used where no cgroup is usable:
// RLIMIT_NPROC, counted per user namespace, bounds a call's processes when toolgate is
// not root. Run as root, the test re-runs itself as nobody (65534), where the v1 pids
// hierarchy is not writable and the rlimit is what applies.
func TestNprocBindsForUnprivilegedUser(t *testing.T) {
	if os.Getuid() == 0 {
		if os.Getenv("TOOLGATE_NPROC_CHILD") != "" {
			t.Fatal("still root in the child")
		}
		requireSandbox(t)
		dir, err := os.MkdirTemp("", "toolgate-nproc-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		bin := copyTestBinary(t, dir, 0o755)
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-test.run=^TestNprocBindsForUnprivilegedUser$", "-test.v", "-test.count=1")
		cmd.Dir = "/"
		cmd.Env = append(os.Environ(), "TOOLGATE_NPROC_CHILD=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
		out, err := cmd.CombinedOutput()
		t.Logf("as nobody:\n%s", out)
		if err != nil {
			t.Fatalf("child test as nobody failed: %v", err)
		}
		if strings.Contains(string(out), "--- SKIP") {
			t.Skipf("the sandbox is not available to an unprivileged user here")
		}
		if !strings.Contains(string(out), "--- PASS: TestNprocBindsForUnprivilegedUser") {
			t.Errorf("child test did not run to a pass")
		}
		return
	}
	c := sandbox.Probe()
	if !c.Available {
		// Unprivileged user namespaces may be blocked where root's are not.
		t.Skipf("sandbox unavailable to uid %d: %s", os.Getuid(), c.Reason)
	}
	t.Logf("process limit: %s", c.ProcessLimit)
	if !strings.HasPrefix(c.ProcessLimit, "RLIMIT_NPROC") {
		t.Skipf("a cgroup bounds processes here; the rlimit fallback is not what applies")
	}
	ws, err := os.MkdirTemp("", "toolgate-nproc-ws-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(ws)
	mark := marker(t)
	spec := bash(ws, fmt.Sprintf(`for i in $(seq 40); do (exec -a %s sleep 30) & done; wait`, mark))
	spec.MaxProcesses = 16
	spec.Timeout = 5 * time.Second
	done := make(chan error, 1)
	go func() {
		_, err := sandbox.Run(t.Context(), spec)
		done <- err
	}()
	most := 0
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			running = false
		default:
			most = max(most, countMarker(mark))
			time.Sleep(20 * time.Millisecond) // sampling /proc, not synchronisation
		}
	}
	t.Logf("at most %d marked processes seen under a limit of 16", most)
	if most > 16 {
		t.Errorf("%d processes ran under RLIMIT_NPROC=16", most)
	}
	if most < 8 {
		t.Errorf("control: only %d processes seen, so the bound proves nothing", most)
	}
	if n := countMarker(mark); n != 0 {
		t.Errorf("%d processes left after the call", n)
	}
}

// copyTestBinary copies this test binary into dir with the given mode.
func copyTestBinary(t *testing.T, dir string, mode os.FileMode) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sandbox.test")
	if err := os.WriteFile(bin, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(bin, mode); err != nil {
		t.Fatal(err)
	}
	return bin
}

// countMarker counts processes whose argv contains m.
func countMarker(m string) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.Contains(string(b), m) {
			n++
		}
	}
	return n
}

func TestTinyProcessLimitStillRuns(t *testing.T) {
	requireSandbox(t)
	spec := bash(t.TempDir(), `echo ok; ulimit -u`)
	spec.MaxProcesses = 1
	res := run(t, spec)
	want := "ok\n16\n"
	if strings.HasPrefix(sandbox.Probe().ProcessLimit, "cgroup") {
		want = "ok\n32\n" // RLIMIT_NPROC is a backstop at twice the cgroup's pids.max
	}
	if string(res.Stdout) != want || res.LimitExceeded != "" {
		t.Errorf("stdout %q stderr %q limit %q", res.Stdout, res.Stderr, res.LimitExceeded)
	}
}
