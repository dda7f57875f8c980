package bridge_test

import (
	"context"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestRevocationStopsARunningBridge: `toolgate grant rm`, run from the shell while a
// bridge serves its turn, stops that turn at its very next call; the catalogue the
// harness was shown stays as it was.
func TestRevocationStopsARunningBridge(t *testing.T) {
	data := testenv.PrivateDir(t)
	tg := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(testenv.Binary(t), append(args, "--data-dir", data)...).CombinedOutput()
		if err != nil {
			t.Fatalf("toolgate %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	id := tg("grant", "add", "--principal", "alice", "--tool", "server.version", "--action", "read")
	p := startBridge(t, "--data-dir", data, "--principal", "alice")
	tr := &mcp.StreamableClientTransport{Endpoint: p.url, HTTPClient: &http.Client{Transport: bearer{p.token}}, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatalf("connect: %v; stderr:\n%s", err, p.stderr)
	}
	defer cs.Close()
	call := func() *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "server.version", Arguments: map[string]any{}})
		if err != nil {
			t.Fatalf("tools/call: %v", err)
		}
		return res
	}
	if res := call(); res.IsError {
		t.Fatalf("granted call refused: %s", textOf(res))
	}
	tg("grant", "rm", id)
	res := call()
	if !res.IsError || res.Meta["toolgate/code"] != "no_matching_grant" {
		t.Errorf("after grant rm: isError=%v meta=%v %s", res.IsError, res.Meta, textOf(res))
	}
	l, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(l.Tools) != 1 || l.Tools[0].Name != "server.version" {
		t.Errorf("the turn's catalogue changed: %v %+v", err, l)
	}
}
