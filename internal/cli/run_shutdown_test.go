package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/store/storetest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// fakeHarness is a harness that leaves a call running: it reads the connection file
// toolgate run wrote (--mcp-config=FILE), opens the bridge's session, starts a long
// bash call, waits until the call's allowed event is in the trail, and exits without
// waiting for the answer. It runs in a child process (TestMain).
func fakeHarness(data string, args []string) int {
	if len(args) == 0 || !strings.HasPrefix(args[0], "--mcp-config=") {
		fmt.Fprintln(os.Stderr, "fake harness: no --mcp-config")
		return 9
	}
	b, err := os.ReadFile(strings.TrimPrefix(args[0], "--mcp-config="))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 10
	}
	var file struct {
		MCPServers map[string]struct {
			URL     string            `json:"url"`
			Headers map[string]string `json:"headers"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(b, &file); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 11
	}
	srv := file.MCPServers["toolgate"]
	post := func(session, body string) (*http.Response, error) {
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", srv.Headers["Authorization"])
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		return http.DefaultClient.Do(req)
	}
	resp, err := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fake","version":"1"}}}`)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 12
	}
	resp.Body.Close()
	session := resp.Header.Get("Mcp-Session-Id")
	if r, err := post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err == nil {
		r.Body.Close()
	}
	go post(session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"local.bash","arguments":{"command":"sleep 120","timeout_seconds":300}}}`)
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		st, err := store.Open(context.Background(), data)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 13
		}
		evs, _ := st.ListAudit(context.Background(), audit.Filter{Tool: "local.bash"})
		st.Close()
		if len(evs) > 0 {
			return 0 // the call is running; the harness is done
		}
	}
	return 14
}

// TestRunRecordsTheCallItsHarnessLeftRunning: the harness of a `toolgate run` exits (on
// its own, or because toolgate forwarded it a SIGTERM) while one of its calls runs:
// before the bridge closes, the kernel cancels the call and records its outcome
// (failed, cancelled or cancelled_by_shutdown) after the allowed event, and the summary
// counts it. Before, bash recorded the cut call as a timeout.
func TestRunRecordsTheCallItsHarnessLeftRunning(t *testing.T) {
	data := testenv.PrivateDir(t)
	ws := t.TempDir()
	t.Setenv(fakeHarnessEnv, data)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	var out, errOut bytes.Buffer
	code := Run(context.Background(), []string{"--data-dir", data, "run", "--harness", "claude-code", "--workspace", ws, "--", os.Args[0]},
		Stdio{In: strings.NewReader(""), Out: &out, Err: &errOut})
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut.String())
	}
	evs := storetest.Trail(t, data)
	if err := audit.Verify(evs); err != nil {
		t.Error(err)
	}
	var got []string
	for _, e := range evs {
		if e.Tool == "local.bash" {
			if e.Code == "sandbox_unavailable" {
				t.Skipf("bash cannot be confined on this host: %s", e.Message)
			}
			got = append(got, string(e.Decision)+":"+e.Code)
		}
	}
	// The harness's exit closes its connection, which cancels the call (cancelled), and
	// ends toolgate run, whose kernel then cancels what is left (cancelled_by_shutdown):
	// whichever comes first names the outcome; there must be one.
	if j := strings.Join(got, " "); j != "allowed: failed:cancelled" && j != "allowed: failed:cancelled_by_shutdown" {
		t.Errorf("bash events %v, want allowed then failed:cancelled or failed:cancelled_by_shutdown\n%s", got, errOut.String())
	}
	if !strings.Contains(errOut.String(), "1 allowed, 0 denied, 1 failed") {
		t.Errorf("summary:\n%s", errOut.String())
	}
}
