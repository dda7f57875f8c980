//go:build linux

package sandbox_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/sandbox"
	"github.com/toolgate/toolgate/internal/testenv"
)

// requireSandbox skips (or, under make test, fails) when this machine cannot confine.
func requireSandbox(t testing.TB) {
	t.Helper()
	c := sandbox.Probe()
	if c.Available {
		return
	}
	if testenv.RequirePeers() {
		t.Fatalf("sandbox unavailable on this machine: %s", c.Reason)
	}
	t.Skipf("sandbox unavailable: %s", c.Reason)
}

var baseEnv = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "TERM=dumb"}

func bash(dir, script string) sandbox.Spec {
	return sandbox.Spec{
		Argv:    []string{"/bin/bash", "--noprofile", "--norc", "-c", script},
		Dir:     dir,
		Env:     baseEnv,
		Timeout: 20 * time.Second,
	}
}

func run(t *testing.T, spec sandbox.Spec) *sandbox.Result {
	t.Helper()
	res, err := sandbox.Run(context.Background(), spec)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func marker(t testing.TB) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "tgmark" + hex.EncodeToString(b)
}

func TestProbeReportsLayers(t *testing.T) {
	c := sandbox.Probe()
	t.Logf("capabilities: %+v", c)
	requireSandbox(t)
	if !c.UserNS || !c.PIDNS || !c.MountNS || !c.NetNS || c.LandlockABI < 1 {
		t.Errorf("Available but a layer is missing: %+v", c)
	}
}

func TestRunsCommandWithOutputAndExitCode(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	res := run(t, bash(ws, `echo out; echo err >&2; pwd; exit 3`))
	if got, want := string(res.Stdout), "out\n"+ws+"\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	if string(res.Stderr) != "err\n" {
		t.Errorf("stderr = %q", res.Stderr)
	}
	if res.ExitCode != 3 || res.TimedOut || res.Truncated {
		t.Errorf("result = %+v", res)
	}
}

func TestEnvironmentIsExactlyTheSpec(t *testing.T) {
	requireSandbox(t)
	t.Setenv("TOOLGATE_TOKEN", "tg-secret-token-value")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-value")
	t.Setenv("LD_PRELOAD", "/nonexistent/evil.so")
	ws := t.TempDir()
	res := run(t, sandbox.Spec{Argv: []string{"env"}, Dir: ws, Env: append(baseEnv, "HOME=/root", "TMPDIR=/tmp"), Timeout: 20 * time.Second})
	lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	got := map[string]string{}
	for _, l := range lines {
		k, v, _ := strings.Cut(l, "=")
		got[k] = v
	}
	for _, kv := range baseEnv {
		k, v, _ := strings.Cut(kv, "=")
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
		delete(got, k)
	}
	if got["HOME"] == "/root" || got["HOME"] == "" || got["TMPDIR"] != got["HOME"] {
		t.Errorf("HOME/TMPDIR not replaced by the scratch directory: %q %q", got["HOME"], got["TMPDIR"])
	}
	delete(got, "HOME")
	delete(got, "TMPDIR")
	if len(got) != 0 {
		t.Errorf("unexpected variables reached the child: %v", got)
	}
	if bytes.Contains(res.Stdout, []byte("secret")) {
		t.Errorf("a secret reached the child: %s", res.Stdout)
	}
}

func TestScratchHomeIsWritableAndRemoved(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	res := run(t, bash(ws, `echo hi > "$HOME/f" && mkdir "$TMPDIR/d" && chmod 000 "$TMPDIR/d" && echo "$HOME"`))
	if res.ExitCode != 0 {
		t.Fatalf("scratch not writable: %+v stderr=%s", res, res.Stderr)
	}
	home := strings.TrimSpace(string(res.Stdout))
	if _, err := os.Stat(home); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("scratch %s left behind: %v", home, err)
	}
}

func TestStdinIsEmpty(t *testing.T) {
	requireSandbox(t)
	res := run(t, bash(t.TempDir(), `cat; echo "n=$(wc -c </dev/stdin)"`))
	if string(res.Stdout) != "n=0\n" || res.TimedOut {
		t.Errorf("stdin not empty: %+v %q", res, res.Stdout)
	}
}

// TestNoNetwork opens a listener in the test process and checks the sandbox cannot reach
// it, and that the same command reaches it when the internet is allowed (so the test can
// fail).
func TestNoNetwork(t *testing.T) {
	requireSandbox(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	script := fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d && echo connected`, port)
	ws := t.TempDir()

	res := run(t, bash(ws, script))
	if res.ExitCode == 0 || bytes.Contains(res.Stdout, []byte("connected")) {
		t.Errorf("confined command reached the host listener: %+v %s", res, res.Stdout)
	}
	select {
	case <-accepted:
		t.Errorf("listener accepted a connection from the sandbox")
	default:
	}
	res = run(t, bash(ws, `cat /sys/class/net/*/operstate 2>/dev/null | wc -l; ls /sys/class/net`))
	if strings.Contains(string(res.Stdout), "eth") {
		t.Errorf("host interfaces visible: %s", res.Stdout)
	}

	spec := bash(ws, script)
	spec.AllowInternet = true
	res = run(t, spec)
	if res.ExitCode != 0 || !bytes.Contains(res.Stdout, []byte("connected")) {
		t.Errorf("with AllowInternet the listener should be reachable: %+v %s", res, res.Stderr)
	}
}

func TestWritesOutsideWorkspaceDenied(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("s3cr3t"), 0o600); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`
echo inside > inside.txt && echo wrote-inside
echo x > %[1]s/new.txt && echo wrote-outside
echo x >> %[2]s && echo appended-outside
rm -f %[2]s && echo removed-outside
cat %[2]s && echo read-outside
echo x > /tmp/%[3]s && echo wrote-tmp
ln -s /etc/passwd escape && echo y > escape && echo wrote-via-link
true`, outside, secret, filepath.Base(ws)+"-tmpprobe")
	res := run(t, bash(ws, script))
	out := string(res.Stdout)
	if !strings.Contains(out, "wrote-inside") {
		t.Fatalf("could not write inside the workspace: %s / %s", out, res.Stderr)
	}
	for _, bad := range []string{"wrote-outside", "appended-outside", "removed-outside", "read-outside", "wrote-tmp", "wrote-via-link", "s3cr3t"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s succeeded: %s", bad, out)
		}
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "s3cr3t" {
		t.Errorf("outside file changed: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(outside, "new.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file created outside: %v", err)
	}
	if _, err := os.Stat("/tmp/" + filepath.Base(ws) + "-tmpprobe"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file created in /tmp: %v", err)
	}
}

func TestProtectedPathsStayReadOnly(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	for _, d := range []string{".git/hooks", ".git/objects"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(ws, ".git", "config")
	if err := os.WriteFile(cfg, []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := bash(ws, `
echo '[core] fsmonitor = evil' >> .git/config && echo wrote-config
echo evil > .git/hooks/pre-commit && echo wrote-hook
rm -rf .git/hooks && echo removed-hooks
mv .git .git-moved && echo moved-git
mv .git/config .git/config.old && echo moved-config
umount .git/config && echo unmounted
echo obj > .git/objects/x && echo wrote-objects
grep CapEff /proc/self/status
true`)
	spec.ReadOnlyPaths = []string{cfg, filepath.Join(ws, ".git", "hooks"), filepath.Join(ws, ".git", "missing")}
	res := run(t, spec)
	out := string(res.Stdout)
	if !strings.Contains(out, "wrote-objects") {
		t.Errorf("rest of .git should stay writable: %s %s", out, res.Stderr)
	}
	for _, bad := range []string{"wrote-config", "wrote-hook", "removed-hooks", "moved-git", "moved-config", "unmounted"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s succeeded: %s", bad, out)
		}
	}
	if !strings.Contains(out, "CapEff:\t0000000000000000") {
		t.Errorf("capabilities not dropped: %s", out)
	}
	if b, _ := os.ReadFile(cfg); string(b) != "[core]\n" {
		t.Errorf(".git/config changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(ws, ".git/hooks/pre-commit")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("hook written: %v", err)
	}
	// The mounts lived only in the sandbox's namespace.
	if err := os.WriteFile(cfg, []byte("[core]\n\tbare = false\n"), 0o644); err != nil {
		t.Errorf("config not writable outside the sandbox afterwards: %v", err)
	}
}

func TestProtectedSymlinkRefused(t *testing.T) {
	requireSandbox(t)
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(ws, ".git", "config")); err != nil {
		t.Fatal(err)
	}
	spec := bash(ws, `echo ran > ran.txt`)
	spec.ReadOnlyPaths = []string{filepath.Join(ws, ".git", "config")}
	_, err := sandbox.Run(context.Background(), spec)
	if !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("err = %v, want ErrUnavailable", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("command ran although refused")
	}
}

func TestPrivateProc(t *testing.T) {
	requireSandbox(t)
	t.Setenv("TOOLGATE_PROC_SECRET", "proc-secret-value")
	res := run(t, bash(t.TempDir(), `echo "pid=$$"; cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n'; cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' ' '`))
	if !strings.HasPrefix(string(res.Stdout), "pid=1\n") {
		t.Errorf("command is not the init of its own PID namespace: %q", res.Stdout)
	}
	if bytes.Contains(res.Stdout, []byte("proc-secret-value")) || bytes.Contains(res.Stdout, []byte(".test")) {
		t.Errorf("host processes visible through /proc: %s", res.Stdout)
	}
}

// procHasMarker reports whether any host process has marker in its command line.
func procHasMarker(marker string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(marker)) {
			return true
		}
	}
	return false
}

func TestTimeoutKillsEscapedProcesses(t *testing.T) {
	requireSandbox(t)
	mark := marker(t)
	spec := bash(t.TempDir(), fmt.Sprintf(`setsid bash -c 'exec -a %s sleep 1000' </dev/null >/dev/null 2>&1 &
(trap '' TERM HUP; exec -a %s-2 sleep 1000) &
sleep 1000`, mark, mark))
	spec.Timeout = 3 * time.Second
	type out struct {
		res *sandbox.Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		r, err := sandbox.Run(context.Background(), spec)
		done <- out{r, err}
	}()
	// Positive control: the escaped process really existed while the call ran.
	seen := false
	for !seen {
		select {
		case o := <-done:
			t.Fatalf("Run returned before the marker process was seen: %+v %v", o.res, o.err)
		default:
		}
		seen = procHasMarker(mark)
		if !seen {
			time.Sleep(10 * time.Millisecond) // polling /proc, not synchronisation
		}
	}
	o := <-done
	if o.err != nil {
		t.Fatalf("Run: %v", o.err)
	}
	if !o.res.TimedOut {
		t.Errorf("TimedOut not set: %+v", o.res)
	}
	if procHasMarker(mark) {
		t.Errorf("a process with marker %s survived the timeout", mark)
	}
}

func TestBackgroundProcessesDieWithTheCommand(t *testing.T) {
	requireSandbox(t)
	mark := marker(t)
	res := run(t, bash(t.TempDir(), fmt.Sprintf(`setsid bash -c 'exec -a %s sleep 1000' </dev/null >/dev/null 2>&1 & echo started`, mark)))
	if res.ExitCode != 0 || res.TimedOut {
		t.Fatalf("%+v", res)
	}
	if procHasMarker(mark) {
		t.Errorf("background process %s outlived the command", mark)
	}
}

func TestParentContextCancelKillsTree(t *testing.T) {
	requireSandbox(t)
	ctx, cancel := context.WithCancel(context.Background())
	spec := bash(t.TempDir(), `echo ready; exec sleep 1000`)
	spec.Timeout = time.Minute
	time.AfterFunc(500*time.Millisecond, cancel)
	_, err := sandbox.Run(ctx, spec)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestOutputCapKillsAndMarks(t *testing.T) {
	requireSandbox(t)
	spec := bash(t.TempDir(), `yes toolgate; echo unreachable >&2`)
	spec.MaxOutput = 4096
	res := run(t, spec)
	if !res.Truncated {
		t.Fatalf("not truncated: %d bytes", len(res.Stdout))
	}
	if n := len(res.Stdout) + len(res.Stderr); n != 4096 {
		t.Errorf("kept %d bytes, want exactly the cap 4096", n)
	}
	if res.TimedOut {
		t.Errorf("overflow reported as timeout")
	}
}

func TestFIFOReadEndsAtTimeout(t *testing.T) {
	requireSandbox(t)
	spec := bash(t.TempDir(), `mkfifo f && cat f`)
	spec.Timeout = time.Second
	res := run(t, spec)
	if !res.TimedOut {
		t.Errorf("FIFO read did not end by timeout: %+v", res)
	}
}

func TestCommandNotFoundIsNotUnavailable(t *testing.T) {
	requireSandbox(t)
	_, err := sandbox.Run(context.Background(), sandbox.Spec{Argv: []string{"no-such-program-xyz"}, Dir: t.TempDir(), Env: baseEnv})
	if err == nil || errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("err = %v, want a plain not-found error", err)
	}
}

func TestBadSpec(t *testing.T) {
	for _, spec := range []sandbox.Spec{
		{},
		{Argv: []string{"true"}, Dir: "relative"},
		{Argv: []string{"true"}, Dir: "/nonexistent/dir"},
	} {
		if _, err := sandbox.Run(context.Background(), spec); err == nil {
			t.Errorf("Run(%+v) succeeded", spec)
		}
	}
}

func BenchmarkRunTrue(b *testing.B) {
	requireSandbox(b)
	ws := b.TempDir()
	spec := sandbox.Spec{Argv: []string{"/bin/bash", "--noprofile", "--norc", "-c", "true"}, Dir: ws, Env: baseEnv}
	for b.Loop() {
		res, err := sandbox.Run(context.Background(), spec)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%v %+v", err, res)
		}
	}
}

func TestDevicesLimited(t *testing.T) {
	requireSandbox(t)
	disks, _ := filepath.Glob("/dev/[sv]d[a-z]")
	nvme, _ := filepath.Glob("/dev/nvme*n1")
	disks = append(disks, nvme...)
	script := `echo to-null > /dev/null && echo null-ok
head -c 4 /dev/urandom | wc -c
echo out > /dev/stdout
echo err > /dev/stderr
cat <(echo procsub)
ls /dev >/dev/null && echo ls-ok
`
	for _, d := range disks {
		script += fmt.Sprintf("head -c 512 %s >/dev/null 2>&1 && echo READ-DISK-%s\n", d, d)
	}
	script += "head -c 1 /dev/kmsg >/dev/null 2>&1 && echo READ-KMSG\n: 2>/dev/null </dev/ptmx && echo READ-PTMX\ntrue"
	res := run(t, bash(t.TempDir(), script))
	out := string(res.Stdout)
	for _, want := range []string{"null-ok", "4\n", "out\n", "procsub", "ls-ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in %q (stderr %q)", want, out, res.Stderr)
		}
	}
	if string(res.Stderr) != "err\n" {
		t.Errorf("stderr = %q", res.Stderr)
	}
	if strings.Contains(out, "READ-") {
		t.Errorf("device readable: %s", out)
	}
	t.Logf("disks tried: %v", disks)
	// Control: with /dev readable as a whole, the world-readable /dev/ptmx opens.
	spec := bash(t.TempDir(), script)
	spec.ReadOnlyRoots = append(append([]string{}, sandbox.DefaultReadOnlyRoots...), "/dev")
	if res := run(t, spec); !strings.Contains(string(res.Stdout), "READ-PTMX") {
		t.Errorf("control: /dev/ptmx not openable even with /dev allowed, so the test proves nothing: %s", res.Stdout)
	}
}
