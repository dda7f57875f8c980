// Package upstreamtest gives tests real upstream MCP servers: the stdio fixture
// (./fixture, built once per test process), the go-sdk's conformance
// everything-server (built from the module), and a scan of /proc for the
// processes a test started, found by a unique marker in their argv.
//
// The fixture is well behaved unless asked otherwise. Flags (pass them to
// Spec): -noise, -stderr-flood N, -grandchild, -ignore-eof, -ignore-term,
// -crash-after D, -ping-delay D, -hang-init, -version V, -caps JSON,
// -page-size N, -record FILE, -record-in FILE (every line it read), -faults (lists huge {bytes}: one line written in
// chunks; wrong_id: an answer to an id never sent, then the right one; twice:
// two answers to one call; stall {ms}: the process writes nothing at all, no
// answer and no ping, for ms or for ever). Tools (tools/call): echo {text}, env, crash
// {code}, hang, sleep {ms}, progress {steps, ms: between steps}, cancellations, change_tools,
// noise, stderr {bytes}, big {bytes}, ask {method, params}, notify {method,
// count}, pids, awkward, batch (answers inside a batch), leak (prints its environment to stderr and
// stdout). Its tools/list and the awkward tool's result hold
// JSON that typed SDKs rewrite (1.50, 1e2, a 20-digit integer, $schema, $defs,
// unknown members, an unknown content type); -record lets a test compare the
// bytes it received with the bytes the fixture wrote.
package upstreamtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/upstream"
)

type built struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

var (
	fixture    built
	everything built
)

func (b *built) build(t testing.TB, name, pkg string) string {
	t.Helper()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "toolgate-upstreamtest-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", b.path, pkg)
		cmd.Dir = testenv.RepoRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		b.out, b.err = cmd.CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, b.err, b.out)
	}
	return b.path
}

// Fixture returns the path of the fixture binary, building it on first use.
func Fixture(t testing.TB) string {
	t.Helper()
	return fixture.build(t, "fixture", "./internal/upstream/upstreamtest/fixture")
}

// EverythingServer returns the path of the go-sdk's conformance server
// (github.com/modelcontextprotocol/go-sdk/conformance/everything-server),
// built from the module toolgate requires. Run it with -http ADDR for
// Streamable HTTP (stateless unless -stateless=false), or bare for stdio.
func EverythingServer(t testing.TB) string {
	t.Helper()
	return everything.build(t, "everything-server", "github.com/modelcontextprotocol/go-sdk/conformance/everything-server")
}

// Marker returns a string unique to this call, to put in a process's argv so
// Processes can find it (and nothing else).
func Marker(t testing.TB) string {
	t.Helper()
	b := make([]byte, 8)
	rand.Read(b)
	return "tgfx-" + hex.EncodeToString(b)
}

// Spec returns a Spec running the fixture with args and a fresh marker (also
// returned), a short stop grace, and the test's name as the server name.
func Spec(t testing.TB, args ...string) (upstream.Spec, string) {
	t.Helper()
	marker := Marker(t)
	return upstream.Spec{
		Name:      "fixture",
		Command:   Fixture(t),
		Args:      append([]string{"-marker", marker}, args...),
		StopGrace: 300 * time.Millisecond,
	}, marker
}

// Processes returns the pids of live (non-zombie) processes whose argv holds
// marker.
func Processes(t testing.TB, marker string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("reading /proc: %v", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(marker)) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

// WaitGone waits (up to limit) until no live process holds marker, and fails
// the test with the survivors if some still do.
func WaitGone(t testing.TB, marker string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		pids := Processes(t, marker)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes with marker %s still alive after %v: %v", marker, limit, pids)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Start starts spec (a fixture Spec with its marker) and reaps it when the
// test ends.
func Start(t testing.TB, spec upstream.Spec, marker string) *upstream.Process {
	t.Helper()
	p, err := upstream.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	Reap(t, p, marker)
	return p
}

// Reap stops p when the test ends and checks that nothing with marker is left.
func Reap(t testing.TB, p *upstream.Process, marker string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			t.Errorf("stopping fixture: %v", err)
		}
		WaitGone(t, marker, 5*time.Second)
	})
}

// EverythingSpec returns a Spec running EverythingServer over stdio as server
// "everything", with a fresh marker (also returned) as its one argument (the server
// reads only flags, so a bare word after them is ignored and marks the process).
func EverythingSpec(t testing.TB) (upstream.Spec, string) {
	t.Helper()
	marker := Marker(t)
	return upstream.Spec{
		Name:      "everything",
		Command:   EverythingServer(t),
		Args:      []string{marker},
		StopGrace: 300 * time.Millisecond,
	}, marker
}

// ServeEverything serves EverythingServer directly over Streamable HTTP on a loopback
// port (statelessly or with sessions) until the test ends, and returns its URL.
func ServeEverything(t testing.TB, stateless bool) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(EverythingServer(t), "-http", addr, fmt.Sprintf("-stateless=%t", stateless), Marker(t))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if i > 500 {
			t.Fatalf("the conformance server did not listen on %s", addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return "http://" + addr + "/mcp"
}
