//go:build linux

package sandbox_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/toolgate/toolgate/internal/sandbox"
)

// TestMain lets the test binary double as a system-call prober run inside the sandbox
// (and as the metadata prober of metadata_test.go).
func TestMain(m *testing.M) {
	if os.Getenv("TOOLGATE_SYSCALL_PROBE") == "1" {
		syscallProbe()
		os.Exit(0)
	}
	if os.Getenv("TOOLGATE_SETID_PROBE") == "1" {
		setIDProbe()
		os.Exit(0)
	}
	if m := os.Getenv("TOOLGATE_PDEATH_CHILD"); m != "" {
		pdeathChild(m)
		os.Exit(0)
	}
	if os.Getenv("TOOLGATE_METADATA_PROBE") == "1" {
		metadataProbe(os.Args[1:])
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// syscallProbe prints name=errno for each refused-or-not system call.
func syscallProbe() {
	res := func(name string, errno unix.Errno) {
		fmt.Printf("%s=%d\n", name, int(errno))
	}
	var params [120]byte
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0)
	if e == 0 {
		unix.Close(int(fd))
	}
	res("io_uring_setup", e)
	_, _, e = unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, uintptr(0xfffffffd), 0) // session keyring
	res("keyctl", e)
	_, _, e = unix.Syscall(unix.SYS_BPF, 0, 0, 0)
	res("bpf", e)
	_, _, e = unix.Syscall(unix.SYS_USERFAULTFD, 0, 0, 0)
	res("userfaultfd", e)
	_, _, e = unix.Syscall(unix.SYS_CLONE3, 0, 0, 0)
	res("clone3", e)
	_, _, e = unix.Syscall(unix.SYS_GETPID, 0, 0, 0)
	res("getpid", e)
	// unshare changes the calling thread; this process exits right after.
	_, _, e = unix.Syscall(unix.SYS_UNSHARE, unix.CLONE_NEWUSER, 0, 0)
	res("unshare_newuser", e)
}

// setIDProbe tries, in the current directory, every way of giving a file the set-uid
// or set-gid bit, and the plain calls beside them, and prints name=errno.
func setIDProbe() {
	res := func(name string, err error) {
		n := 0
		if en, ok := err.(unix.Errno); ok {
			n = int(en)
		} else if err != nil {
			n = -1
		}
		fmt.Printf("%s=%d\n", name, n)
	}
	sys := func(name string, nr uintptr, a ...uintptr) {
		a = append(a, 0, 0, 0, 0)
		r, _, e := unix.Syscall6(nr, a[0], a[1], a[2], a[3], 0, 0)
		if e == 0 && (name == "openat_creat_setuid" || name == "open_creat_setuid" || name == "creat_setuid" || name == "openat_tmpfile_setuid") {
			unix.Close(int(r))
		}
		if e == 0 {
			res(name, nil)
		} else {
			res(name, e)
		}
	}
	path := func(s string) uintptr {
		b, _ := unix.BytePtrFromString(s)
		return uintptr(unsafe.Pointer(b))
	}
	cwd := atFDCWD
	fd, err := unix.Open("f", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	res("create_plain", err)
	sys("fchmodat_setuid", unix.SYS_FCHMODAT, cwd, path("f"), 0o4755)
	sys("fchmodat_setgid", unix.SYS_FCHMODAT, cwd, path("f"), 0o2755)
	sys("fchmodat2_setuid", unix.SYS_FCHMODAT2, cwd, path("f"), 0o4755, 0)
	sys("fchmod_setuid", unix.SYS_FCHMOD, uintptr(fd), 0o6755)
	sys("openat_creat_setuid", unix.SYS_OPENAT, cwd, path("g"), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o4755)
	sys("openat_tmpfile_setuid", unix.SYS_OPENAT, cwd, path("."), unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o4755)
	sys("mknodat_setuid", unix.SYS_MKNODAT, cwd, path("j"), unix.S_IFREG|0o4755, 0)
	legacySetIDProbe(sys, path)
	var how [24]byte // struct open_how {flags, mode, resolve}: flags O_RDONLY
	sys("openat2", unix.SYS_OPENAT2, cwd, path("f"), uintptr(unsafe.Pointer(&how[0])), unsafe.Sizeof(how))
	// Beside them, the same calls without the bits work.
	sys("fchmodat_plain", unix.SYS_FCHMODAT, cwd, path("f"), 0o755)
	sys("fchmod_plain", unix.SYS_FCHMOD, uintptr(fd), 0o750)
	// Without O_CREAT the mode argument means nothing, whatever it holds.
	r, _, e := unix.Syscall6(unix.SYS_OPENAT, cwd, path("f"), unix.O_RDONLY|unix.O_CLOEXEC, 0o6777, 0, 0)
	if e == 0 {
		unix.Close(int(r))
		res("openat_junk_mode", nil)
	} else {
		res("openat_junk_mode", e)
	}
	unix.Close(fd)
	var st unix.Stat_t
	for _, n := range []string{"f", "g", "h", "i", "j", "k"} {
		if unix.Stat(n, &st) == nil && st.Mode&0o6000 != 0 {
			fmt.Printf("setid_%s=1\n", n)
		}
	}
}

// probeOutsideAndInside runs the test binary as the prober env selects, once as a plain
// child in a fresh directory (the control) and once in the sandbox with a fresh
// workspace, and parses both outputs.
func probeOutsideAndInside(t *testing.T, env string) (outside, inside map[string]unix.Errno) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{env}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("control probe: %v", err)
	}
	outside = parseProbe(string(out))
	t.Logf("outside: %v", outside)
	spec := sandbox.Spec{Argv: []string{exe}, Dir: t.TempDir(), Env: []string{env}}
	spec.ReadOnlyRoots = append(append([]string{}, sandbox.DefaultReadOnlyRoots...), filepath.Dir(exe))
	res := run(t, spec)
	inside = parseProbe(string(res.Stdout))
	t.Logf("inside: %v (stderr %q)", inside, res.Stderr)
	return outside, inside
}

func parseProbe(out string) map[string]unix.Errno {
	m := map[string]unix.Errno{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(l, "=")
		var n int
		fmt.Sscan(v, &n)
		m[k] = unix.Errno(n)
	}
	return m
}

func TestSeccompRefusesAttackSurface(t *testing.T) {
	requireSandbox(t)
	if !strings.HasPrefix(sandbox.Probe().Seccomp, "deny-list") {
		t.Skipf("no system-call filter on this machine: %s", sandbox.Probe().Seccomp)
	}
	// Control: outside the sandbox (a plain child, so unshare does not touch this
	// process) the same calls are not refused with EPERM.
	outside, inside := probeOutsideAndInside(t, "TOOLGATE_SYSCALL_PROBE=1")
	want := map[string]unix.Errno{
		"io_uring_setup": unix.EPERM, "keyctl": unix.EPERM, "bpf": unix.EPERM, "userfaultfd": unix.EPERM,
		"clone3": unix.ENOSYS, "unshare_newuser": unix.EPERM, "getpid": 0,
	}
	for k, w := range want {
		got, ok := inside[k]
		if !ok || got != w {
			t.Errorf("%s inside the sandbox: %v (present %v), want %v", k, got, ok, w)
		}
	}
	// The controls that prove the filter (not something else) refused them.
	// (io_uring and userfaultfd may be disabled by sysctl on other hosts, so they are
	// not used as controls.)
	for _, k := range []string{"keyctl", "clone3"} {
		if outside[k] == want[k] {
			t.Errorf("control: %s outside the sandbox also gives %v, so the check proves nothing", k, outside[k])
		}
	}
}

func TestNestedUserNamespaceRefusedInBash(t *testing.T) {
	requireSandbox(t)
	if !strings.HasPrefix(sandbox.Probe().Seccomp, "deny-list") {
		t.Skipf("no system-call filter on this machine: %s", sandbox.Probe().Seccomp)
	}
	script := `unshare -U -r id -u && echo NESTED; unshare -U -r -n true && echo NESTED-NET; echo done`
	res := run(t, bash(t.TempDir(), script))
	if strings.Contains(string(res.Stdout), "NESTED") || !strings.Contains(string(res.Stdout), "done") {
		t.Errorf("nested user namespace created: %q %q", res.Stdout, res.Stderr)
	}
	// Control: on this machine, outside the sandbox, the same script creates them.
	out, err := exec.Command("/bin/bash", "--noprofile", "--norc", "-c", script).Output()
	if err != nil || !strings.Contains(string(out), "NESTED-NET") {
		t.Errorf("control: nested namespaces not creatable outside the sandbox either (%v, %q), so the check proves nothing", err, out)
	}
}

// A command could plant a set-uid (or set-gid) file in the workspace: a copy of a shell,
// chmod 4755, owned on the host by the workspace's owner (root when toolgate runs as
// root), for any local user to run later. The system-call filter now refuses every
// mode argument carrying those bits (chmod, fchmod, fchmodat, fchmodat2, and open,
// openat, creat, mknod, mknodat when they create), and openat2, whose mode it cannot
// read, is ENOSYS. Control: outside the sandbox the same calls set the bits; inside,
// the plain calls beside them work.
func TestSetIDBitsRefused(t *testing.T) {
	requireSandbox(t)
	if !strings.HasPrefix(sandbox.Probe().Seccomp, "deny-list") {
		t.Skipf("no system-call filter on this machine: %s", sandbox.Probe().Seccomp)
	}
	outside, inside := probeOutsideAndInside(t, "TOOLGATE_SETID_PROBE=1")
	for name, e := range inside {
		switch {
		case strings.HasPrefix(name, "setid_"):
			t.Errorf("%s has a set-id bit after the call", strings.TrimPrefix(name, "setid_"))
		case name == "openat2":
			if e != unix.ENOSYS {
				t.Errorf("openat2 = %v, want ENOSYS", e)
			}
		case strings.HasSuffix(name, "_setuid") || strings.HasSuffix(name, "_setgid"):
			if e != unix.EPERM {
				t.Errorf("%s = %v, want EPERM", name, e)
			}
			if outside[name] != 0 {
				t.Errorf("control: %s fails outside the sandbox too (%v)", name, outside[name])
			}
		default:
			if e != 0 {
				t.Errorf("%s = %v inside, want it to work", name, e)
			}
		}
	}
	if len(inside) < 10 {
		t.Errorf("prober output incomplete: %v", inside)
	}
}
