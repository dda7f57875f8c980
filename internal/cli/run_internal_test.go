package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestRunEndsTheBridgeSession runs a stand-in harness under toolgate run and checks
// that once it exited the bridge's session id answers 404 unknown_session, even to the
// token the harness was given, and that toolgate returns the harness's exit code.
func TestRunEndsTheBridgeSession(t *testing.T) {
	copyTo := filepath.Join(t.TempDir(), "conn.json")
	script := filepath.Join(t.TempDir(), "fake-claude")
	body := "#!/bin/sh\ncase \"$1\" in --mcp-config=*) ;; *) exit 9;; esac\ncp \"${1#--mcp-config=}\" \"$FAKE_COPY\" || exit 10\nexit 3\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKE_COPY", copyTo)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	var seen *mcpserver.Bridge
	runBridgeHook = func(b *mcpserver.Bridge) { seen = b }
	t.Cleanup(func() { runBridgeHook = nil })

	var out, errOut bytes.Buffer
	code := Run(context.Background(), []string{"--data-dir", testenv.PrivateDir(t), "run", "--harness", "claude-code", "--", script},
		Stdio{In: strings.NewReader(""), Out: &out, Err: &errOut})
	if code != 3 {
		t.Fatalf("exit %d, want the harness's 3\n%s", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), "completed: 0 audit event(s)") {
		t.Errorf("no outcome line:\n%s", errOut.String())
	}
	if seen == nil {
		t.Fatal("no bridge was opened")
	}
	select {
	case <-seen.Done():
	default:
		t.Error("the bridge session is still open after the harness exited")
	}
	var file struct {
		MCPServers map[string]struct {
			URL     string            `json:"url"`
			Headers map[string]string `json:"headers"`
		} `json:"mcpServers"`
	}
	b, err := os.ReadFile(copyTo)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	s := file.MCPServers["toolgate"]
	req := httptest.NewRequest("POST", s.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", s.Headers["Authorization"])
	req.Header.Set("Mcp-Session-Id", seen.SessionID())
	rec := httptest.NewRecorder()
	seen.ServeHTTP(rec, req)
	if rec.Code != 404 || !strings.Contains(rec.Body.String(), "unknown_session") {
		t.Errorf("after the run the session answers %d %s; want 404 unknown_session", rec.Code, rec.Body.String())
	}
}

func TestRedactBearer(t *testing.T) {
	in := "+  \"Authorization\": \"Bearer tgx1.abc.def\"\n+Authorization = 'Bearer tgx1.x'\n+ \"bearerToken\": \"tgx1.q\",\n"
	got := redactBearer(in)
	if strings.Contains(got, "tgx1") || strings.Count(got, "<token>") != 3 {
		t.Errorf("redactBearer = %q", got)
	}
}

func TestHarnessNames(t *testing.T) {
	base := func(id string) string { return "p_" + strings.ReplaceAll(id, "local.", "") }
	n, a, err := harnessNames("", "toolgate", base)
	if err != nil || a != nil || n("local.x") != "p_x" {
		t.Fatalf("no harness: %v %v", err, n("local.x"))
	}
	n, a, err = harnessNames("cursor", "toolgate", base)
	if err != nil {
		t.Fatal(err)
	}
	if got := n("local.read_file"); got != "p_read_file" {
		t.Errorf("acceptable name changed to %q", got)
	}
	if got := n("up.stream.tool"); got == "p_up.stream.tool" || strings.Contains(got, ".") {
		t.Errorf("dotted name published as %q", got)
	}
	if a("p_read_file") != "p_read_file" {
		t.Errorf("cursor alias = %q", a("p_read_file"))
	}
	if _, _, err := harnessNames("nope", "toolgate", base); err == nil {
		t.Error("unknown harness accepted")
	}
	if _, _, err := harnessNames("cursor", "bad name", base); err == nil {
		t.Error("bad server name accepted")
	}
}
