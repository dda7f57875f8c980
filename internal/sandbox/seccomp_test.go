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
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Control: outside the sandbox (a plain child, so unshare does not touch this
	// process) the same calls are not refused with EPERM.
	cmd := exec.Command(exe)
	cmd.Env = []string{"TOOLGATE_SYSCALL_PROBE=1"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("control probe: %v", err)
	}
	outside := parseProbe(string(out))
	t.Logf("outside: %v", outside)

	spec := sandbox.Spec{Argv: []string{exe}, Dir: t.TempDir(), Env: []string{"TOOLGATE_SYSCALL_PROBE=1"}}
	spec.ReadOnlyRoots = append(append([]string{}, sandbox.DefaultReadOnlyRoots...), filepath.Dir(exe))
	res := run(t, spec)
	inside := parseProbe(string(res.Stdout))
	t.Logf("inside: %v (stderr %q)", inside, res.Stderr)
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
