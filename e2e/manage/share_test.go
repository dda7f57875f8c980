package manage

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

type stdioMCP struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *testenv.SyncBuffer
	done   chan struct{}
}

// startMCP runs `toolgate mcp` over data and waits until it answers initialize.
func startMCP(t *testing.T, data string) *stdioMCP {
	t.Helper()
	m := &stdioMCP{stderr: &testenv.SyncBuffer{}, done: make(chan struct{})}
	m.cmd = exec.Command(testenv.Binary(t), "mcp", "--no-local-tools", "--database-dir", data)
	m.cmd.Env = testenv.Env(data)
	m.cmd.Stderr = m.stderr
	m.stdin, _ = m.cmd.StdinPipe()
	out, _ := m.cmd.StdoutPipe()
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { m.cmd.Wait(); close(m.done) }()
	t.Cleanup(func() {
		m.cmd.Process.Kill()
		<-m.done
		if t.Failed() {
			t.Logf("toolgate mcp stderr:\n%s", m.stderr.String())
		}
	})
	fmt.Fprintln(m.stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		if sc.Scan() {
			line <- sc.Text()
		}
		io.Copy(io.Discard, out)
	}()
	select {
	case l := <-line:
		if !strings.Contains(l, `"result"`) {
			t.Fatalf("initialize: %s", l)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("toolgate mcp did not answer: %s", m.stderr.String())
	}
	return m
}

// waitCount waits until exactly n processes carry marker and stay so for a moment.
func waitCount(t *testing.T, marker string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	stable := 0
	for {
		got := len(upstreamtest.Processes(t, marker))
		if got == n {
			stable++
			if stable == 20 {
				return
			}
		} else {
			stable = 0
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d upstream processes carry the marker, want %d", got, n)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// TestOneProcessPerDataDirectory: toolgate serve and two toolgate mcp on one data
// directory run one process of a required server between them (the daemon hosts, the
// others relay); when the daemon stops, one of the others takes over and the server
// runs once again; when they exit, nothing is left.
func TestOneProcessPerDataDirectory(t *testing.T) {
	data := testenv.PrivateDir(t)
	s := startServe(t, data)
	marker := upstreamtest.Marker(t)
	doc := fmt.Sprintf(`{"mcpServers":{"fx":{"command":%q,"args":["-marker",%q],"required":true}}}`, upstreamtest.Fixture(t), marker)
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	os.WriteFile(cfg, []byte(doc), 0o600)
	tgOK(t, data, "install", cfg)
	waitCount(t, marker, 1)
	m1, m2 := startMCP(t, data), startMCP(t, data)
	waitCount(t, marker, 1)
	pids := upstreamtest.Processes(t, marker)
	if ppid := parentOf(t, pids[0]); ppid != s.Cmd.Process.Pid {
		t.Fatalf("the server's parent is %d, not the daemon %d", ppid, s.Cmd.Process.Pid)
	}
	s.Stop(t, syscall.SIGTERM)
	waitCount(t, marker, 1)
	host := parentOf(t, upstreamtest.Processes(t, marker)[0])
	if host != m1.cmd.Process.Pid && host != m2.cmd.Process.Pid {
		t.Fatalf("after the daemon stopped the server runs under %d, neither toolgate mcp (%d, %d)", host, m1.cmd.Process.Pid, m2.cmd.Process.Pid)
	}
	for _, m := range []*stdioMCP{m1, m2} {
		m.stdin.Close()
		select {
		case <-m.done:
		case <-time.After(60 * time.Second):
			t.Fatal("toolgate mcp did not exit when its stdin closed")
		}
	}
	noChild(t, marker, "every toolgate process exited")
}

func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	var ppid int
	fmt.Sscan(fields[1], &ppid)
	return ppid
}

// TestSecretCanaryThroughTheBinary: a secret installed in env and in a header through
// the CLI and the daemon appears in no answer, log, database file, audit event or
// process listing, though the server received it.
func TestSecretCanaryThroughTheBinary(t *testing.T) {
	data := testenv.PrivateDir(t)
	s := startServe(t, data)
	marker := upstreamtest.Marker(t)
	canary := "tgcanary" + strings.ReplaceAll(marker, "-", "")
	doc := fmt.Sprintf(`{"mcpServers":{"fx":{"command":%q,"args":["-marker",%q],"env":{"API_KEY":%q}},
		"remote":{"url":"https://mcp.example.invalid/mcp?api_key=%s","headers":{"Authorization":"Bearer %s","X-Api-Key":%q}}}}`,
		upstreamtest.Fixture(t), marker, canary, canary, canary, canary)
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	os.WriteFile(cfg, []byte(doc), 0o600)
	var answers strings.Builder
	answers.WriteString(tgOK(t, data, "install", cfg, "--json"))
	answers.WriteString(tgOK(t, data, "restart", "fx", "--json"))
	waitCount(t, marker, 1)
	pid := upstreamtest.Processes(t, marker)[0]
	environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if !strings.Contains(string(environ), "API_KEY="+canary) {
		t.Fatal("the server did not get its secret")
	}
	for _, args := range [][]string{{"ls", "--json"}, {"ls"}, {"details", "fx", "--json"}, {"details", "fx"},
		{"details", "remote", "--json"}, {"restart", "remote", "--json"}, {"audit", "--json"}} {
		answers.WriteString(tgOK(t, data, args...))
	}
	time.Sleep(200 * time.Millisecond)
	if strings.Contains(answers.String(), canary) {
		t.Fatalf("the canary is in an answer:\n%s", answers.String())
	}
	noSecretLeft(t, canary, data, s)
	var evs []json.RawMessage
	out := tgOK(t, data, "audit", "--json")
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		evs = append(evs, json.RawMessage(l))
	}
	if len(evs) < 3 {
		t.Fatalf("audit trail: %s", out)
	}
}
