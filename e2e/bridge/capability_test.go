package bridge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestBridgeCapabilityNarrows: `toolgate bridge --capability …` serves the grants'
// catalogue narrowed by its capabilities. With the default grants the catalogue holds
// toolgate.escalate; "local.*" hides it (tools/list is empty and a call is refused
// tool_unavailable, word for word like a tool that does not exist), and
// "toolgate.escalate:read" keeps it listed but refuses its (execute) call
// outside_capability, so the turn never escalates. The audit trail says why.
func TestBridgeCapabilityNarrows(t *testing.T) {
	data := testenv.PrivateDir(t)
	connect := func(p *bridgeProc) *mcp.ClientSession {
		t.Helper()
		tr := &mcp.StreamableClientTransport{Endpoint: p.url, HTTPClient: &http.Client{Transport: bearer{p.token}}, MaxRetries: -1}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(context.Background(), tr, nil)
		if err != nil {
			t.Fatalf("connect: %v; stderr:\n%s", err, p.stderr)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	callTool := func(cs *mcp.ClientSession, name string) (code, text string) {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"reason": "need a person"}})
		if err != nil {
			t.Fatalf("tools/call %s: %v", name, err)
		}
		if !res.IsError {
			t.Errorf("%s was not refused: %s", name, textOf(res))
		}
		code, _ = res.Meta["toolgate/code"].(string)
		return code, textOf(res)
	}
	listNames := func(cs *mcp.ClientSession) string {
		t.Helper()
		l, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		var names []string
		for _, tool := range l.Tools {
			names = append(names, tool.Name)
		}
		return strings.Join(names, ",")
	}

	hidden := connect(startBridge(t, "--data-dir", data, "--capability", "local.*"))
	if got := listNames(hidden); got != "" {
		t.Errorf("--capability local.* lists %q, want nothing", got)
	}
	code, text := callTool(hidden, "toolgate.escalate")
	missingCode, missingText := callTool(hidden, "nope.missing")
	if code != "tool_unavailable" || missingCode != code ||
		strings.Replace(text, "toolgate.escalate", "NAME", 1) != strings.Replace(missingText, "nope.missing", "NAME", 1) {
		t.Errorf("a tool outside the capability answers %s %q; an unknown one %s %q", code, text, missingCode, missingText)
	}

	readOnly := connect(startBridge(t, "--data-dir", data, "--capability", "toolgate.escalate:read"))
	if got := listNames(readOnly); got != "toolgate.escalate" {
		t.Errorf("--capability toolgate.escalate:read lists %q", got)
	}
	if code, text := callTool(readOnly, "toolgate.escalate"); code != "outside_capability" || !strings.Contains(text, `"retryable":false`) {
		t.Errorf("escalate under a read capability: %s %q", code, text)
	}

	out, err := exec.Command(testenv.Binary(t), "audit", "--data-dir", data, "--json", "--tool", "toolgate.escalate").Output()
	if err != nil {
		t.Fatalf("toolgate audit: %v", err)
	}
	var codes []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var ev struct{ Decision, Code string }
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if ev.Decision != "denied" {
			t.Errorf("audit decision %q: the turn escalated", ev.Decision)
		}
		codes = append(codes, ev.Code)
	}
	if strings.Join(codes, ",") != "outside_capability,outside_capability" {
		t.Errorf("audit codes for toolgate.escalate = %v, want outside_capability twice", codes)
	}
}
