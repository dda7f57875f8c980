package hostrelay

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/host/hosttest"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

const nobody = 65534

// nobodyBinary copies this test binary where nobody can run it.
func nobodyBinary(t *testing.T) (bin, base string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("running a process as another user needs root")
	}
	base, err := os.MkdirTemp("", "hostrelay-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	bin = filepath.Join(base, "hostrelay.test")
	dst, err := os.OpenFile(bin, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return bin, base
}

// dialAsNobody runs bin as nobody to connect to the relay at path.
func dialAsNobody(t *testing.T, bin, path string) string {
	t.Helper()
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), helperDial+"="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("dialling as nobody: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestAnotherUserCannotUseTheRelay(t *testing.T) {
	bin, base := nobodyBinary(t)
	d := hosttest.NewDialer()
	echoParams(d, "fx")
	dir := testenv.PrivateDir(t)
	n := open(t, dir, Options{NewHost: fakeHost(d, def("fx"))})
	sock := filepath.Join(dir, sockName)
	fi, err := os.Lstat(sock)
	if err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %s: %v, %v (want a socket, mode 0600)", sock, fi.Mode(), err)
	}
	if fi, err := os.Lstat(filepath.Join(dir, lockName)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("lock file: %v, %v (want 0600)", fi.Mode(), err)
	}

	// Through the data directory: its mode stops another user before the socket.
	if out := dialAsNobody(t, bin, sock); !strings.HasPrefix(out, "refused:") || !strings.Contains(out, "permission denied") {
		t.Errorf("nobody through the data directory: %q", out)
	}

	// The socket made reachable and writable by everyone (as a mistake could): the
	// host still refuses a peer of another uid, unanswered.
	link := filepath.Join(base, "exposed.sock")
	if err := os.Link(sock, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(link, 0o666); err != nil {
		t.Fatal(err)
	}
	out := dialAsNobody(t, bin, link)
	os.Chmod(link, 0o600)
	t.Logf("nobody through an exposed socket: %s", out)
	if !strings.HasPrefix(out, "refused:") {
		t.Errorf("nobody through an exposed socket: %q", out)
	}
	if st := n.Stats(); st.RefusedPeers != 1 || st.Clients != 0 {
		t.Errorf("after nobody's attempt: %+v (want one refused peer, no client)", st)
	}

	// And a client refuses a host of another uid.
	nobodyDir := filepath.Join(base, "data")
	if err := os.Mkdir(nobodyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(nobodyDir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	launch(t, nobodyDir, "fake", &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}, bin).waitReady()
	_, err = dialClient(testCtx(t), filepath.Join(nobodyDir, sockName), Limits{}.withDefaults(), nil, nil)
	var pe *PeerError
	if !errors.As(err, &pe) || pe.UID != nobody || pe.WantUID != 0 {
		t.Errorf("dialling a host run by nobody: %v", err)
	}
}

// longDir returns a private data directory whose socket path does not fit sun_path.
func longDir(t *testing.T) string {
	dir := testenv.PrivateDir(t)
	for i := 0; len(filepath.Join(dir, sockName)) <= maxSunPath; i++ {
		dir = filepath.Join(dir, fmt.Sprintf("%d-%s", i, strings.Repeat("d", 40)))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// hostFixture opens a hosting Node on dir over the upstream fixture, and returns it
// with the helpers' upstream setting for the same fixture and marker.
func hostFixture(t *testing.T, dir string, lim Limits) (*Node, string) {
	t.Helper()
	fixture, marker := upstreamtest.Fixture(t), upstreamtest.Marker(t)
	t.Cleanup(func() { upstreamtest.WaitGone(t, marker, 20*time.Second) })
	n := open(t, dir, Options{NewHost: fixtureHost(fixture, marker, nil), Limits: lim})
	if !n.Stats().Hosting {
		t.Fatal("the test's Node does not host")
	}
	return n, "fixture:" + fixture + ":" + marker
}

func TestLongDataDirectoryPath(t *testing.T) {
	dir := longDir(t)
	n, up := hostFixture(t, dir, Limits{})
	marker := up[strings.LastIndexByte(up, ':')+1:]
	if !strings.HasPrefix(n.addr, "/proc/self/fd/") || len(n.addr) > maxSunPath {
		t.Fatalf("socket address %q for a %d-byte path", n.addr, len(filepath.Join(dir, sockName)))
	}
	// Other processes reach the socket in the directory through descriptors of their own.
	ps := startProcs(t, 2, dir, up)
	callAll(t, ps, "long")
	if st := n.Stats(); !st.Hosting || st.Clients != 2 {
		t.Errorf("host stats %+v, want hosting with 2 clients", st)
	}
	fi, err := os.Lstat(filepath.Join(dir, sockName))
	if err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("the socket in the long directory: %v, %v", fi.Mode(), err)
	}
	if pids := upstreamtest.Processes(t, marker); len(pids) != 1 {
		t.Errorf("upstream processes: %v, want 1", pids)
	}
}

// floodAndStall makes r ask for a flood of progress and events, then flood requests,
// and never read. It returns when the host stopped reading it (or the flood is out).
func floodAndStall(r *raw) <-chan struct{} {
	done := make(chan struct{})
	go func() { // it blocks once the host stops reading: that is the point
		defer close(done)
		r.nc.SetWriteDeadline(time.Now().Add(60 * time.Second))
		r.nc.Write([]byte(`{"jsonrpc":"2.0","id":2,"method":"watch"}` + "\n" +
			`{"jsonrpc":"2.0","id":3,"method":"call","params":{"server":"fx","method":"tools/call","progress":true,"params":{"name":"progress","arguments":{"steps":20000},"_meta":{"progressToken":"t"}}}}` + "\n"))
		for i := range 5000 {
			if _, err := fmt.Fprintf(r.nc, `{"jsonrpc":"2.0","id":%d,"method":"snapshot"}`+"\n", 10+i); err != nil {
				return
			}
		}
	}()
	return done
}

// TestASlowClientDoesNotSlowOthers: while a client that asked for a flood of progress
// and events, and floods requests, reads nothing (and is not yet dropped), another
// process's calls — on the same upstream connection as the flood — and events go
// through. Were the host to wait for the stuck client anywhere (the upstream's reader
// calling Progress, the host's observer, a shared queue), they would wait the whole
// WriteTimeout.
func TestASlowClientDoesNotSlowOthers(t *testing.T) {
	dir := testenv.PrivateDir(t)
	n, up := hostFixture(t, dir, Limits{WriteTimeout: 10 * time.Minute, NotificationQueue: 64})
	good := startProc(t, dir, up)
	good.do(command{Op: "watch"})
	good.waitEvent("resync", 1)

	bad := dialRaw(t, n)
	bad.hello()
	floodAndStall(bad)
	waitUntil(t, "the host to drop progress for the client that does not read", func() bool { return n.Stats().DroppedProgress > 0 })

	for i := range 10 {
		callAll(t, []*proc{good}, fmt.Sprint("during-", i))
	}
	good.do(command{Op: "call", Tool: "change_tools"}) // list_changed: a new catalogue version
	good.waitEvent("catalog fx", 1)
	if st := n.Stats(); st.Clients != 2 || st.DroppedClients != 0 {
		t.Fatalf("host stats %+v: the stuck client should still be connected", st)
	}
	t.Logf("host stats: %+v", n.Stats())
}

// TestAClientThatReadsNothingIsDropped: after WriteTimeout without reading, the host
// drops the client; its call is cancelled and everyone else carries on.
func TestAClientThatReadsNothingIsDropped(t *testing.T) {
	dir := testenv.PrivateDir(t)
	n, _ := hostFixture(t, dir, Limits{WriteTimeout: 200 * time.Millisecond, NotificationQueue: 64})
	other := open(t, dir, Options{RelayOnly: true})
	bad := dialRaw(t, n)
	bad.hello()
	flooded := floodAndStall(bad)
	waitUntil(t, "the host to drop the client that reads nothing", func() bool { return n.Stats().DroppedClients == 1 })
	<-flooded
	// What it had not read is there, then the end (a reset: the host closed with the
	// flood unread).
	bad.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.Copy(io.Discard, bad.r); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("reading the dropped connection to its end: %v", err)
	}
	if st := n.Stats(); st.Clients != 1 {
		t.Errorf("host stats %+v: want the other client only", st)
	}
	ctx := testCtx(t)
	if _, err := other.Call(ctx, "fx", "tools/call", []byte(`{"name":"echo","arguments":{"text":"x"}}`), host.CallOptions{}); err != nil {
		t.Errorf("another client's call after the drop: %v", err)
	}
}

// TestAnotherUserNamespaceCannotUseTheRelay: a process of this very uid in a user
// namespace of its own — what bash's sandbox runs commands in — is refused by the host
// (and refuses it), even with the socket in reach.
func TestAnotherUserNamespaceCannotUseTheRelay(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mapping uid 0 into a new user namespace needs root")
	}
	d := hosttest.NewDialer()
	dir := testenv.PrivateDir(t)
	n := open(t, dir, Options{NewHost: fakeHost(d, def("fx"))})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	inUserNS := func(env string) string {
		cmd := exec.Command(self, "-test.run=^$")
		cmd.Env = append(os.Environ(), env+"="+filepath.Join(dir, sockName))
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Skipf("no user namespace here: %v %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	// The host closes on it unanswered (a client that does not check the host)…
	if out := inUserNS(helperRawDial); !strings.HasPrefix(out, "closed:") {
		t.Errorf("a raw hello from another user namespace: %q, want the connection closed", out)
	}
	if st := n.Stats(); st.RefusedPeers != 1 || st.Clients != 0 {
		t.Errorf("host stats %+v: want the peer refused", st)
	}
	// … and a relay client there refuses the host too (it cannot even see it).
	if out := inUserNS(helperDial); !strings.HasPrefix(out, "refused:") {
		t.Errorf("a relay client in another user namespace: %q", out)
	}
}
