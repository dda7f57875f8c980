//go:build linux

package sandbox_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/sandbox"
)

// A named UNIX socket outside the workspace, in a directory the command cannot even
// list, stands for docker.sock or an ssh-agent: the command must not reach it. Control:
// the same perl one-liner connects outside the sandbox. socketpair keeps working.
func TestUnixSocketOutsideUnreachable(t *testing.T) {
	requireSandbox(t)
	if !strings.HasPrefix(sandbox.Probe().Seccomp, "deny-list") {
		t.Skipf("no system-call filter on this machine: %s", sandbox.Probe().Seccomp)
	}
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("perl not installed")
	}
	hidden := filepath.Join(t.TempDir(), "hidden")
	if err := os.Mkdir(hidden, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(hidden, "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan struct{}, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HOST-SOCKET-SECRET\n"))
			c.Close()
			accepted <- struct{}{}
		}
	}()
	script := `perl -MIO::Socket::UNIX -e '$s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or die "refused: $!\n"; print scalar <$s>' ` + sock +
		`; perl -MSocket -e 'socketpair(my $a, my $b, AF_UNIX, SOCK_STREAM, 0) or die "socketpair: $!\n"; print "PAIR-OK\n"'`

	out, err := exec.Command("/bin/bash", "--noprofile", "--norc", "-c", script).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "HOST-SOCKET-SECRET") {
		t.Fatalf("control: the socket is not reachable outside the sandbox either (%v, %q)", err, out)
	}
	<-accepted

	res := run(t, bash(t.TempDir(), script))
	if strings.Contains(string(res.Stdout), "HOST-SOCKET-SECRET") || !strings.Contains(string(res.Stderr), "refused") {
		t.Errorf("the sandboxed command reached the socket: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	if !strings.Contains(string(res.Stdout), "PAIR-OK") {
		t.Errorf("socketpair no longer works: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	select {
	case <-accepted:
		t.Errorf("the listener accepted a connection from the sandbox")
	default:
	}
}
