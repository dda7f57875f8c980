package localmcp

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/store/storetest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// rawMCP is a `toolgate mcp` driven line by line over its real stdin and stdout.
type rawMCP struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *testenv.SyncBuffer
	done   chan error
}

func startRawMCP(t *testing.T, w *world, extra ...string) *rawMCP {
	t.Helper()
	args := append([]string{"mcp", "--workspace", w.ws, "--database-dir", w.data}, extra...)
	m := &rawMCP{cmd: exec.Command(testenv.Binary(t), args...), lines: make(chan string, 64), stderr: &testenv.SyncBuffer{}, done: make(chan error, 1)}
	m.cmd.Env = baseEnv(t)
	m.cmd.Stderr = m.stderr
	var err error
	if m.stdin, err = m.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			m.lines <- sc.Text()
		}
		close(m.lines)
		m.done <- m.cmd.Wait()
	}()
	t.Cleanup(func() {
		m.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("toolgate mcp stderr:\n%s", m.stderr.String())
		}
	})
	m.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if l := <-m.lines; !strings.Contains(l, `"id":1`) {
		t.Fatalf("initialize answered %q", l)
	}
	return m
}

func (m *rawMCP) send(t *testing.T, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(m.stdin, l+"\n"); err != nil {
			t.Fatal(err)
		}
	}
}

// exit waits (bounded) for the process to end and returns every line it still printed.
func (m *rawMCP) exit(t *testing.T) (rest []string, err error) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-m.lines:
			if !ok {
				return rest, <-m.done
			}
			rest = append(rest, l)
		case <-timeout:
			t.Fatalf("toolgate mcp did not exit\n%s", m.stderr.String())
		}
	}
}

// TestShutdownRecordsEveryOutcome: `toolgate mcp` with a bash call running, then the
// client closes stdin (the call may finish for --drain 1s, then is cancelled) or sends
// SIGTERM (cancelled at once): the call is answered failed cancelled_by_shutdown, its
// outcome is in the trail after its allowed event, the chain verifies, and the process
// exits 0. Before, stdin EOF waited for the whole bash call (its timeout: here 300 s),
// and SIGTERM recorded the cut call as an ordinary tool failure.
func TestShutdownRecordsEveryOutcome(t *testing.T) {
	const bash = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"toolgate_local_bash","arguments":{"command":"sleep 120","timeout_seconds":300}}}`
	for _, how := range []string{"stdin closed", "SIGTERM"} {
		t.Run(how, func(t *testing.T) {
			w := newWorld(t)
			m := startRawMCP(t, w, "--drain", "1s")
			m.send(t, bash)
			storetest.WaitAllowed(t, w.data, "local.bash", 1)
			if how == "SIGTERM" {
				m.cmd.Process.Signal(syscall.SIGTERM)
			} else {
				m.stdin.Close()
			}
			rest, err := m.exit(t)
			if err != nil {
				t.Errorf("exit: %v", err)
			}
			if got := strings.Join(rest, "\n"); !strings.Contains(got, `"id":2`) || !strings.Contains(got, `"toolgate/code":"cancelled_by_shutdown"`) {
				t.Errorf("the bash call was answered %q", got)
			}
			evs := storetest.Trail(t, w.data)
			if err := audit.Verify(evs); err != nil {
				t.Errorf("chain: %v", err)
			}
			var decisions []string
			for _, e := range evs {
				if e.Tool == "local.bash" {
					decisions = append(decisions, string(e.Decision)+":"+e.Code)
				}
			}
			if strings.Join(decisions, " ") != "allowed: failed:cancelled_by_shutdown" {
				t.Errorf("bash events %v, want allowed then failed:cancelled_by_shutdown", decisions)
			}
		})
	}
}

// A client that writes its requests and closes stdin at once (printf … | toolgate mcp)
// gets every one answered as if the input had stayed open: the end of input starts the
// drain only for calls already running, never refuses what was read before it.
func TestRequestsBeforeEOFAreAllAnswered(t *testing.T) {
	w := newWorld(t)
	in := []string{`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`}
	const n = 40
	for i := 1; i <= n; i++ {
		in = append(in, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"toolgate_local_read_file","arguments":{"path":"README.md"}}}`, i))
	}
	out, _ := rawLines(t, baseEnv(t), []string{"mcp", "--workspace", w.ws, "--database-dir", w.data}, in)
	answered := 0
	for _, l := range out {
		m := mustJSONLine(t, l)
		if id, _ := m["id"].(float64); id >= 1 {
			answered++
			if strings.Contains(l, `"isError":true`) {
				t.Errorf("call %v refused: %s", id, l)
			}
		}
	}
	if answered != n {
		t.Errorf("%d of %d calls answered", answered, n)
	}
}
