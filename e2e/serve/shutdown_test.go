package serve

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/store/storetest"
)

// longBash is a bash call that outlives any drain deadline the tests set.
const longBash = `{"name":"local.bash","arguments":{"command":"sleep 120","timeout_seconds":300}}`

// invokeAsync posts body to /v1/tools/invoke and delivers the answer's tool result
// (or the transport error) on the returned channel.
func invokeAsync(url, token, body string) <-chan string {
	return postAsync(url+"/v1/tools/invoke", token, body)
}

// postAsync posts a JSON body with the given extra headers (name, value, …) and
// delivers "STATUS BODY", or the transport error, on the returned channel. It never
// fails the test itself, so it may run in any goroutine.
func postAsync(url, token, body string, hdr ...string) <-chan string {
	out := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- "transport error: " + err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		out <- fmt.Sprintf("%d %s", resp.StatusCode, b)
	}()
	return out
}

// checkEveryOutcome verifies the chain with `toolgate audit --verify` and checks that
// every allowed event has its outcome: a later failed cancelled_by_shutdown event of
// the same call. It returns how many such calls there were.
func checkEveryOutcome(t *testing.T, data string) int {
	t.Helper()
	if out, errOut, code := run(t, data, "audit", "--verify"); code != 0 {
		t.Fatalf("audit --verify: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code := run(t, data, "audit", "--json")
	if code != 0 {
		t.Fatalf("audit --json: exit %d %s", code, errOut)
	}
	allowed := map[string]bool{}
	outcome := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e audit.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		switch {
		case e.Decision == audit.Allowed:
			allowed[e.CallID] = true
		case allowed[e.CallID]:
			outcome[e.CallID] = string(e.Decision) + ":" + e.Code
		}
	}
	for id := range allowed {
		if outcome[id] != "failed:cancelled_by_shutdown" {
			t.Errorf("call %s: allowed, then %q; want failed:cancelled_by_shutdown", id, outcome[id])
		}
	}
	return len(allowed)
}

// TestShutdownRecordsEveryOutcome: SIGTERM while bash calls run (over /v1 and over an
// /mcp session), the drain deadline (--drain 1s) expires: each call is cancelled, its
// client still gets an answer (failed, cancelled_by_shutdown), and its outcome event is
// written before the store closes; the chain verifies; the daemon exits 0. Before, the
// connection was cut, the outcome write failed with "sql: database is closed", and the
// trail kept an allowed event with no outcome. A second signal cuts a long drain short
// the same way.
func TestShutdownRecordsEveryOutcome(t *testing.T) {
	t.Run("drain deadline", func(t *testing.T) {
		data, _ := setup(t, nil)
		d := startServe(t, data, workspaceDir(t), "--drain", "1s")
		tok := d.ownerToken()
		var answers []<-chan string
		for range 3 {
			answers = append(answers, invokeAsync(d.url, tok, longBash))
		}
		s := openMCP(t, d.url, tok)
		mcpAnswer := postAsync(s.url, tok,
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"local.bash","arguments":{"command":"sleep 120","timeout_seconds":300}}}`,
			"Mcp-Session-Id", s.id, "MCP-Protocol-Version", "2025-06-18", "Accept", "application/json")
		storetest.WaitAllowed(t, data, "local.bash", 4)
		if err := d.stop(syscall.SIGTERM); err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
		for i, a := range answers {
			if got := <-a; !strings.HasPrefix(got, "200 ") || !strings.Contains(got, `"toolgate/code":"cancelled_by_shutdown"`) {
				t.Errorf("invoke %d answered %s", i, got)
			}
		}
		if got := <-mcpAnswer; !strings.HasPrefix(got, "200 ") || !strings.Contains(got, `"toolgate/code":"cancelled_by_shutdown"`) {
			t.Errorf("tools/call answered %s", got)
		}
		if n := checkEveryOutcome(t, data); n != 4 {
			t.Errorf("%d allowed calls in the trail, want 4", n)
		}
		stderr := d.stderr.String()
		if strings.Contains(stderr, "database is closed") || !strings.Contains(stderr, "4 call(s) still running were cancelled") {
			t.Errorf("stderr:\n%s", stderr)
		}
	})
	// A closed terminal sends SIGHUP, whose default action ends the process on the spot:
	// it is a shutdown like SIGTERM.
	t.Run("SIGHUP", func(t *testing.T) { cutOneCall(t, "1s", syscall.SIGHUP) })
	// Without the second signal this waits for the hour-long drain and d.stop's bound
	// fails the test.
	t.Run("second signal", func(t *testing.T) { cutOneCall(t, "1h", syscall.SIGTERM, syscall.SIGTERM) })
}

// cutOneCall starts serve with --drain drain and one long bash call, then sends sigs
// (each after the one before has begun the shutdown), and checks that serve exits 0,
// the call is answered cancelled_by_shutdown and the trail has its outcome.
func cutOneCall(t *testing.T, drain string, sigs ...syscall.Signal) {
	t.Helper()
	data, _ := setup(t, nil)
	d := startServe(t, data, workspaceDir(t), "--drain", drain)
	answer := invokeAsync(d.url, d.ownerToken(), longBash)
	storetest.WaitAllowed(t, data, "local.bash", 1)
	for _, sig := range sigs[:len(sigs)-1] {
		d.cmd.Process.Signal(sig)
		for !strings.Contains(d.stderr.String(), "shutting down") {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := d.stop(sigs[len(sigs)-1]); err != nil {
		t.Errorf("exit after %v: %v", sigs, err)
	}
	if got := <-answer; !strings.Contains(got, `"toolgate/code":"cancelled_by_shutdown"`) {
		t.Errorf("invoke answered %s", got)
	}
	if n := checkEveryOutcome(t, data); n != 1 {
		t.Errorf("%d allowed calls in the trail, want 1", n)
	}
}
