//go:build linux

package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/toolgate/toolgate/internal/sandbox"
)

// metadataOps are the system calls metadataProbe makes on each target, in order. Every
// one changes a file's metadata (or a name beside it) without writing its data, which
// Landlock does not govern for chmod, chown, utime and xattrs.
var metadataOps = []string{
	"chmod", "fchmodat2", "fchmodat2_opath", "fchmod", "chown", "lchown", "fchownat_opath", "fchown",
	"utimensat", "futimesat", "utimensat_opath", "setxattr", "lsetxattr", "fsetxattr", "removexattr",
	"truncate", "mknod_fifo", "mknod_reg", "link_here", "rename_here", "open_write",
}

// metadataProbe runs inside the sandbox (the test binary re-executed there). Each
// argument is kind:path; kind "x" (a file this test made) gets destructive values
// (mode 0777, times of 2001, an xattr left behind, a name made beside it), kind "s" (a
// system file) only values it already has, so nothing changes even where a call
// succeeds. It prints op=errno per target, one target per line, "path op=errno ...".
func metadataProbe(args []string) {
	for _, a := range args {
		kind, p, _ := strings.Cut(a, ":")
		destructive := kind == "x"
		var st unix.Stat_t
		statErr := unix.Lstat(p, &st)
		mode := uint32(0o777) // set-id bits are refused everywhere: TestSetIDBitsRefused
		times := []unix.Timespec{unix.NsecToTimespec(978307200e9), unix.NsecToTimespec(978307200e9)}
		if !destructive {
			mode = st.Mode & 0o7777
			times = []unix.Timespec{st.Atim, st.Mtim}
		}
		dir := filepath.Dir(p)
		res := map[string]error{}
		if statErr != nil {
			fmt.Printf("%s stat=%d\n", p, statErr.(unix.Errno))
			continue
		}
		res["chmod"] = unix.Fchmodat(unix.AT_FDCWD, p, mode, 0)
		_, _, e := unix.Syscall6(unix.SYS_FCHMODAT2, atFDCWD, cstr(p), uintptr(mode), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
		res["fchmodat2"] = errnoOrNil(e)
		opath, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			res["fchmodat2_opath"], res["fchownat_opath"], res["utimensat_opath"] = err, err, err
		} else {
			_, _, e = unix.Syscall6(unix.SYS_FCHMODAT2, uintptr(opath), cstr(""), uintptr(mode), unix.AT_EMPTY_PATH, 0, 0)
			res["fchmodat2_opath"] = errnoOrNil(e)
			res["fchownat_opath"] = unix.Fchownat(opath, "", int(st.Uid), int(st.Gid), unix.AT_EMPTY_PATH)
			res["utimensat_opath"] = unix.UtimesNanoAt(opath, "", times, unix.AT_EMPTY_PATH)
			unix.Close(opath)
		}
		rd, rdErr := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if rdErr != nil {
			res["fchmod"], res["fchown"], res["fsetxattr"] = rdErr, rdErr, rdErr
		} else {
			res["fchmod"] = unix.Fchmod(rd, mode)
			res["fchown"] = unix.Fchown(rd, int(st.Uid), int(st.Gid))
		}
		res["chown"] = unix.Fchownat(unix.AT_FDCWD, p, int(st.Uid), int(st.Gid), 0)
		res["lchown"] = unix.Fchownat(unix.AT_FDCWD, p, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW)
		res["utimensat"] = unix.UtimesNanoAt(unix.AT_FDCWD, p, times, 0)
		tv := []unix.Timeval{unix.NsecToTimeval(unix.TimespecToNsec(times[0])), unix.NsecToTimeval(unix.TimespecToNsec(times[1]))}
		res["futimesat"] = futimesat(p, tv)
		undo := func(name string, err error, remove func() error) {
			res[name] = err
			if err == nil && !destructive {
				_ = remove()
			}
		}
		undo("setxattr", unix.Setxattr(p, "user.toolgate_probe", []byte("1"), 0), func() error { return unix.Removexattr(p, "user.toolgate_probe") })
		undo("lsetxattr", unix.Lsetxattr(p, "user.toolgate_probe_l", []byte("1"), 0), func() error { return unix.Lremovexattr(p, "user.toolgate_probe_l") })
		if rdErr == nil {
			undo("fsetxattr", unix.Fsetxattr(rd, "user.toolgate_probe_f", []byte("1"), 0), func() error { return unix.Fremovexattr(rd, "user.toolgate_probe_f") })
			unix.Close(rd)
		}
		if destructive {
			res["removexattr"] = unix.Removexattr(p, "user.toolgate_keep")
			res["truncate"] = unix.Truncate(p, 1)
			res["mknod_fifo"] = unix.Mknod(filepath.Join(dir, "probe-fifo"), unix.S_IFIFO|0o644, 0)
			res["mknod_reg"] = unix.Mknod(filepath.Join(dir, "probe-reg"), unix.S_IFREG|0o644, 0)
			res["link_here"] = unix.Link(p, filepath.Join(dir, "probe-link"))
			res["rename_here"] = unix.Rename(p, p+".renamed")
			if res["rename_here"] == nil {
				_ = unix.Rename(p+".renamed", p)
			}
		}
		if fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0); err == nil {
			res["open_write"] = nil
			unix.Close(fd) // opened, never written
		} else {
			res["open_write"] = err
		}
		var line strings.Builder
		line.WriteString(p)
		for _, op := range metadataOps {
			if err, ok := res[op]; ok {
				n := 0
				if err != nil {
					if en, ok := err.(unix.Errno); ok {
						n = int(en)
					} else {
						n = -1
					}
				}
				fmt.Fprintf(&line, " %s=%d", op, n)
			}
		}
		fmt.Println(line.String())
	}
}

// atFDCWD is AT_FDCWD (-100) as a raw system-call argument.
var atFDCWD = func() uintptr { fd := unix.AT_FDCWD; return uintptr(fd) }()

// cstr is s as a NUL-terminated system-call argument (s never holds a NUL here).
func cstr(s string) uintptr {
	b, _ := unix.BytePtrFromString(s)
	return uintptr(unsafe.Pointer(b))
}

func errnoOrNil(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// probeResults parses metadataProbe's output: path → op → errno.
func probeResults(t *testing.T, out []byte) map[string]map[string]unix.Errno {
	t.Helper()
	m := map[string]map[string]unix.Errno{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		ops := map[string]unix.Errno{}
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			var n int
			fmt.Sscan(v, &n)
			ops[k] = unix.Errno(n)
		}
		m[f[0]] = ops
	}
	return m
}

// runProber runs the test binary inside the sandbox as the metadata prober.
func runProber(t *testing.T, spec sandbox.Spec, targets ...string) map[string]map[string]unix.Errno {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	spec.Argv = append([]string{exe}, targets...)
	spec.Env = []string{"TOOLGATE_METADATA_PROBE=1"}
	spec.ReadOnlyRoots = append(append(append([]string{}, sandbox.DefaultReadOnlyRoots...), filepath.Dir(exe)), spec.ReadOnlyRoots...)
	if spec.Timeout == 0 {
		spec.Timeout = 20 * time.Second
	}
	res, err := sandbox.Run(context.Background(), spec)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("prober exited %d: %s", res.ExitCode, res.Stderr)
	}
	t.Logf("prober:\n%s", res.Stdout)
	return probeResults(t, res.Stdout)
}

// plainDir makes a directory directly under the system temporary directory that any
// user may search (t.TempDir's parent is private to root), so that only the sandbox's
// own layers decide what happens beneath it.
func plainDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "toolgate-meta-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// victim makes a 0644 file with a user xattr the probe may try to remove.
func victim(t *testing.T, dir, name string) (path string, before unix.Stat_t) {
	t.Helper()
	path = filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("victim\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(path, "user.toolgate_keep", []byte("k"), 0); err != nil {
		t.Skipf("user xattrs unsupported here: %v", err)
	}
	if err := unix.Lstat(path, &before); err != nil {
		t.Fatal(err)
	}
	return path, before
}

// Inside the sandbox, chmod 0777, chown, utimensat, setxattr and friends on a file
// outside the workspace used to succeed: Landlock does not govern metadata, and with
// toolgate running as root the sandbox's uid owned the host's files. Now every such
// call fails (EROFS from the read-only mounts; EPERM/EACCES from the sandbox's
// unprivileged uid) and the file is unchanged on the host, while the same calls on a
// file in the workspace work (the control).
func TestMetadataOutsideWorkspaceRefused(t *testing.T) {
	requireSandbox(t)
	ws := plainDir(t)
	outside := plainDir(t)
	in, _ := victim(t, ws, "inside.txt")
	out, before := victim(t, outside, "outside.txt")
	// The outside directory is readable (not writable) in the sandbox, so that calls on
	// an open descriptor (fchmod, fchown, fsetxattr) reach the metadata check.
	spec := sandbox.Spec{Dir: ws, ReadOnlyRoots: []string{outside}}
	got := runProber(t, spec, "x:"+in, "x:"+out)

	noControl := map[string]bool{} // ops with no working control inside
	for _, op := range metadataOps {
		e, ok := got[in][op]
		if !ok {
			t.Errorf("control: %s missing from the inside results", op)
			continue
		}
		if e != 0 {
			t.Errorf("control: %s on a workspace file failed with %v, so its refusal outside proves nothing", op, e)
			noControl[op] = true
		}
	}
	for _, op := range metadataOps {
		e, ok := got[out][op]
		if !ok {
			t.Errorf("%s missing from the outside results", op)
			continue
		}
		if e == 0 {
			t.Errorf("%s on %s succeeded in the sandbox", op, out)
		}
	}
	var after unix.Stat_t
	if err := unix.Lstat(out, &after); err != nil {
		t.Fatal(err)
	}
	if after.Mode != before.Mode || after.Uid != before.Uid || after.Gid != before.Gid || after.Mtim != before.Mtim || after.Size != before.Size {
		t.Errorf("outside file changed on the host: mode %o→%o uid %d→%d mtime %v→%v size %d→%d",
			before.Mode, after.Mode, before.Uid, after.Uid, before.Mtim, after.Mtim, before.Size, after.Size)
	}
	buf := make([]byte, 64)
	if n, err := unix.Listxattr(out, buf); err != nil || string(bytes.TrimRight(buf[:n], "\x00")) != "user.toolgate_keep" {
		t.Errorf("outside file's xattrs changed: %q %v", buf[:max(n, 0)], err)
	}
	for _, name := range []string{"probe-fifo", "probe-reg", "probe-link", "outside.txt.renamed"} {
		if _, err := os.Lstat(filepath.Join(outside, name)); err == nil {
			t.Errorf("%s was created outside the workspace", name)
		}
	}
	// Inside, the destructive values really landed (the control's effect, seen from the host).
	var ist unix.Stat_t
	if err := unix.Lstat(in, &ist); err == nil && ist.Mode&0o7777 != 0o777 {
		t.Errorf("control: the workspace file's mode is %o on the host, want 777", ist.Mode&0o7777)
	}
}

// System files outside the workspace: the calls are made with the values the files
// already have (nothing would change even if they succeeded), on files the sandbox
// can read — /etc/passwd, /dev/null, a sysfs attribute with the host's /sys in view
// (AllowInternet keeps the host's network namespace, so /sys is the host's) — and must
// all fail. Before the read-only mounts, chmod on /dev/null, /etc/passwd or a sysfs
// file succeeded (the sandbox's root owned them).
func TestMetadataOfSystemFilesRefused(t *testing.T) {
	requireSandbox(t)
	targets := []string{"s:/etc/passwd", "s:/dev/null", "s:/sys/class/net/lo/mtu", "s:/proc/sys/kernel/domainname"}
	for _, allowInternet := range []bool{false, true} {
		spec := sandbox.Spec{Dir: plainDir(t), AllowInternet: allowInternet}
		got := runProber(t, spec, targets...)
		for _, tg := range targets {
			p := strings.TrimPrefix(tg, "s:")
			ops, ok := got[p]
			if !ok {
				t.Errorf("internet=%v: no result for %s", allowInternet, p)
				continue
			}
			if _, statFailed := ops["stat"]; statFailed {
				continue // not present in this view (e.g. lo's sysfs entry)
			}
			for op, e := range ops {
				if e != 0 {
					continue
				}
				if p == "/dev/null" && op == "open_write" {
					continue // /dev/null stays writable
				}
				t.Errorf("internet=%v: %s on %s succeeded in the sandbox", allowInternet, op, p)
			}
			if p == "/dev/null" && ops["open_write"] != 0 {
				t.Errorf("/dev/null is not writable: %v", ops["open_write"])
			}
		}
	}
}

// The sandbox's uid is not the host's root: seen from the host, a process of the call
// runs as an unprivileged uid (when toolgate is root) or as toolgate's own uid, and a
// root-owned owner-only file in a directory the sandbox may read stays unreadable.
// Files the command creates in the workspace belong to the workspace's owner on the
// host, and root-owned workspace files stay writable.
func TestSandboxUIDIsNotHostRoot(t *testing.T) {
	requireSandbox(t)
	ws := plainDir(t)
	ro := plainDir(t)
	if err := os.WriteFile(filepath.Join(ro, "private"), []byte("owner-only\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ro, "public"), []byte("anyone\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "mine"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mark := marker(t)
	spec := bash(ws, fmt.Sprintf(`cat %[1]s/public; cat %[1]s/private 2>/dev/null && echo READ-PRIVATE
echo new > mine && echo wrote-mine; echo made > created; mkdir -p sub/deeper && echo x > sub/deeper/f
stat -c '%%u:%%g' mine; cat /proc/self/uid_map | tr -s ' '
touch started; exec -a %[2]s sleep 30`, ro, mark))
	spec.ReadOnlyRoots = append(append([]string{}, sandbox.DefaultReadOnlyRoots...), ro)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		res *sandbox.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := sandbox.Run(ctx, spec)
		done <- result{r, err}
	}()
	uidLine := ""
	for uidLine == "" {
		select {
		case r := <-done:
			t.Fatalf("the call ended before its process was seen: %+v %v", r.res, r.err)
		default:
		}
		if _, err := os.Stat(filepath.Join(ws, "started")); err != nil {
			time.Sleep(10 * time.Millisecond) // polling, not synchronisation
			continue
		}
		if pid := pidWithMarker(mark); pid != "" {
			b, _ := os.ReadFile("/proc/" + pid + "/status")
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "Uid:") {
					uidLine = l
				}
			}
		}
		time.Sleep(10 * time.Millisecond) // polling /proc, not synchronisation
	}
	cancel()
	r := <-done
	if r.res == nil {
		r.res = &sandbox.Result{}
	}
	t.Logf("host view: %s; output %q %q", uidLine, r.res.Stdout, r.res.Stderr)
	want := os.Getuid()
	if want == 0 {
		want = sandbox.SandboxUID
	}
	if f := strings.Fields(uidLine); len(f) != 5 || f[1] != fmt.Sprint(want) || f[2] != fmt.Sprint(want) || f[3] != fmt.Sprint(want) || f[4] != fmt.Sprint(want) {
		t.Errorf("the call's process runs as %q on the host, want uid %d throughout", uidLine, want)
	}
	out := string(r.res.Stdout)
	if !strings.Contains(out, "anyone") {
		t.Errorf("control: the world-readable file beside the private one was not read: %q %q", out, r.res.Stderr)
	}
	if os.Getuid() == 0 && strings.Contains(out, "READ-PRIVATE") {
		t.Errorf("a root-owned 0600 file was readable: %q", out)
	}
	if !strings.Contains(out, "wrote-mine") || !strings.Contains(out, "0:0") {
		t.Errorf("a workspace file owned by the workspace's owner is not the command's own: %q %q", out, r.res.Stderr)
	}
	for _, f := range []string{"mine", "created", "sub", "sub/deeper/f"} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(ws, f), &st); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if int(st.Uid) != os.Getuid() || int(st.Gid) != os.Getgid() {
			t.Errorf("%s is owned by %d:%d on the host, want toolgate's %d:%d", f, st.Uid, st.Gid, os.Getuid(), os.Getgid())
		}
	}
}

// pidWithMarker returns the pid of a host process whose argv contains m.
func pidWithMarker(m string) string {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && bytes.Contains(b, []byte(m)) {
			return e.Name()
		}
	}
	return ""
}

// Control for the prober itself: outside the sandbox, as the test's own user, the
// destructive calls on a file of its own succeed, so a refusal inside is the sandbox's.
func TestMetadataProberControl(t *testing.T) {
	dir := plainDir(t)
	p, _ := victim(t, dir, "f")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "x:"+p)
	cmd.Env = []string{"TOOLGATE_METADATA_PROBE=1"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	for op, e := range probeResults(t, out)[p] {
		if e != 0 {
			t.Errorf("control: %s fails even outside the sandbox: %v", op, e)
		}
	}
}

// The scratch directory is made under TMPDIR, which may lie below a directory private
// to root (as under go test, or TMPDIR=/root/tmp). With the sandbox's uid unprivileged
// it must still be reachable and writable, by absolute path too, and files made there
// and in the workspace are toolgate's on the host.
func TestScratchUnderPrivateTMPDIR(t *testing.T) {
	requireSandbox(t)
	t.Setenv("TMPDIR", t.TempDir()) // t.TempDir's parent is 0700
	ws := t.TempDir()
	res := run(t, bash(ws, `echo h > "$HOME/f" && mkdir -p "$TMPDIR/d/e" && cat "$HOME/f" && cd / && ls "$OLDPWD" >/dev/null && echo ws-by-path`))
	if string(res.Stdout) != "h\nws-by-path\n" || res.ExitCode != 0 {
		t.Errorf("scratch or workspace unusable: %q %q", res.Stdout, res.Stderr)
	}
}

// With toolgate as the host's root, the helper is toolgate's executable run as
// SandboxUID: an executable only root may run (mode 0700) cannot confine anything, and
// the probe says why instead of a bare "permission denied". Control: the same copy,
// mode 0755, confines.
func TestUnexecutableBinaryExplained(t *testing.T) {
	requireSandbox(t)
	if os.Getuid() != 0 || !strings.HasPrefix(sandbox.Probe().Identity, fmt.Sprintf("uid %d", sandbox.SandboxUID)) {
		t.Skip("only toolgate as the host's root runs its helper as another uid")
	}
	dir := t.TempDir()
	for _, c := range []struct {
		mode os.FileMode
		want string
	}{{0o700, "Available:false"}, {0o755, "Available:true"}} {
		bin := copyTestBinary(t, dir, c.mode)
		out, _ := exec.Command(bin, "-test.run=^TestProbeReportsLayers$", "-test.v").CombinedOutput()
		if !strings.Contains(string(out), c.want) {
			t.Errorf("mode %04o: probe output lacks %q: %s", c.mode, c.want, out)
		}
		if c.mode == 0o700 && !strings.Contains(string(out), "must be executable by others: chmod o+rx") {
			t.Errorf("mode 0700: the reason does not say what to do: %s", out)
		}
	}
}

// pdeathChild is a toolgate stand-in: it runs one confined command that would sleep
// for a minute, and is killed by the test while it does.
func pdeathChild(mark string) {
	dir := os.Getenv("TOOLGATE_PDEATH_DIR")
	_, _ = sandbox.Run(context.Background(), sandbox.Spec{
		Argv: []string{"/bin/bash", "--noprofile", "--norc", "-c", "exec -a " + mark + " sleep 60"},
		Dir:  dir, Env: baseEnv, Timeout: time.Minute,
	})
}

// When toolgate dies mid-call (SIGKILL: no cleanup runs), the call's processes die
// with it (Pdeathsig on the namespace's init). The parent-death signal is cleared by
// any change of credentials, and the helper now changes uid (to SandboxUID) before it
// starts: this checks the signal is set after that.
func TestToolgateDeathKillsTheCall(t *testing.T) {
	requireSandbox(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	mark := marker(t)
	cmd := exec.Command(exe)
	// Its scratch directory stays behind (nothing removes it when toolgate is killed):
	// under this test's own TMPDIR.
	cmd.Env = []string{"TOOLGATE_PDEATH_CHILD=" + mark, "TOOLGATE_PDEATH_DIR=" + t.TempDir(), "TMPDIR=" + t.TempDir()}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	for !procHasMarker(mark) {
		time.Sleep(10 * time.Millisecond) // polling /proc, not synchronisation
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	for i := 0; procHasMarker(mark); i++ {
		if i == 2000 {
			t.Fatalf("the call's process %s outlived toolgate by 20 s", mark)
		}
		time.Sleep(10 * time.Millisecond) // polling /proc, not synchronisation
	}
}
