//go:build linux

package sandbox_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A descriptor toolgate inherited without close-on-exec (from a harness or a shell)
// must not reach the sandboxed command: it could be a socket to the host, which no
// namespace, Landlock rule or system-call filter would stop. Control: a plain child
// of this process does inherit it.
func TestInheritedDescriptorsNotPassedOn(t *testing.T) {
	requireSandbox(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	// Move the write end to a high number and clear close-on-exec, as an fd inherited
	// from toolgate's parent would be.
	const leaked = 237
	if err := unix.Dup2(int(w.Fd()), leaked); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(leaked)
	if _, err := unix.FcntlInt(uintptr(leaked), unix.F_SETFD, 0); err != nil {
		t.Fatal(err)
	}
	script := `test -e /proc/self/fd/` + strconv.Itoa(leaked) + ` && echo LEAKED; echo done`
	out, err := exec.Command("/bin/bash", "--noprofile", "--norc", "-c", script).Output()
	if err != nil || !strings.Contains(string(out), "LEAKED") {
		t.Fatalf("control: a plain child does not inherit fd %d (%v, %q), so the check proves nothing", leaked, err, out)
	}
	res := run(t, bash(t.TempDir(), script))
	if strings.Contains(string(res.Stdout), "LEAKED") || !strings.Contains(string(res.Stdout), "done") {
		t.Errorf("the sandboxed command inherited fd %d: %q %q", leaked, res.Stdout, res.Stderr)
	}
}
