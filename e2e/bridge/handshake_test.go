package bridge_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

const escalateCall = `{"jsonrpc":"2.0","id":%ID%,"method":"tools/call","params":{"name":"toolgate.escalate","arguments":{"reason":"before initialize"}}}`

func escalate(id string) string { return strings.ReplaceAll(escalateCall, "%ID%", id) }

// auditedEscalations counts the audited toolgate.escalate calls in data.
func auditedEscalations(t *testing.T, data string) int {
	t.Helper()
	out, err := exec.Command(testenv.Binary(t), "audit", "--json", "--data-dir", data, "--tool", "toolgate.escalate").Output()
	if err != nil {
		t.Fatalf("toolgate audit: %v", err)
	}
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(line) != "" {
			n++
		}
	}
	return n
}

// rpcCodes returns the JSON-RPC error code of each answer in raw (one message
// or an array), 0 for a result.
func rpcCodes(t *testing.T, raw []byte) []float64 {
	t.Helper()
	var list []map[string]any
	if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("[")) {
		if err := json.Unmarshal(raw, &list); err != nil {
			t.Fatalf("answer %s: %v", raw, err)
		}
	} else {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("answer %s: %v", raw, err)
		}
		list = []map[string]any{m}
	}
	var codes []float64
	for _, m := range list {
		e, _ := m["error"].(map[string]any)
		c, _ := e["code"].(float64)
		codes = append(codes, c)
	}
	return codes
}

// TestAttackToolCallBeforeInitializeHTTP: a bridge's session is opened by an
// initialize; before one, a session-based request is 400 with -32600 and runs
// nothing (no escalation is audited), alone or batched behind an initialize,
// which cannot be batched. ping is served, and a 2026-07-28 request needs no
// handshake. After initialize the turn works.
func TestAttackToolCallBeforeInitializeHTTP(t *testing.T) {
	data := testenv.PrivateDir(t)
	p := startBridge(t, "--data-dir", data)
	post := func(body string, hdr ...string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, p.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+p.token)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
			// One event per answer: read them back as one message or an array.
			var events []string
			for _, line := range strings.Split(string(raw), "\n") {
				if d, ok := strings.CutPrefix(line, "data: "); ok {
					events = append(events, d)
				}
			}
			raw = []byte(strings.Join(events, ","))
			if len(events) > 1 {
				raw = []byte("[" + string(raw) + "]")
			}
		}
		return res.StatusCode, raw
	}
	if code, raw := post(escalate("1")); code != http.StatusBadRequest || rpcCodes(t, raw)[0] != -32600 {
		t.Errorf("tools/call before initialize: %d %s, want 400 with -32600", code, raw)
	}
	if code, raw := post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); code != http.StatusBadRequest || rpcCodes(t, raw)[0] != -32600 {
		t.Errorf("tools/list before initialize: %d %s, want 400 with -32600", code, raw)
	}
	if code, raw := post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		t.Errorf("notification before initialize: %d %s", code, raw)
	}
	code, raw := post(`[{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}},` + escalate("4") + `]`)
	if c := rpcCodes(t, raw); code != http.StatusOK || len(c) != 2 || c[0] != -32600 || c[1] != -32600 {
		t.Errorf("initialize batched with a call: %d %s, want both -32600", code, raw)
	}
	if code, raw := post(`{"jsonrpc":"2.0","id":5,"method":"ping"}`); code != http.StatusOK || rpcCodes(t, raw)[0] != 0 {
		t.Errorf("ping before initialize: %d %s", code, raw)
	}
	if n := auditedEscalations(t, data); n != 0 {
		t.Fatalf("%d escalations ran before initialize", n)
	}
	modern := `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"server.version","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	if code, raw := post(modern, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "server.version"); code != http.StatusOK || rpcCodes(t, raw)[0] != 0 {
		t.Errorf("2026-07-28 call without a handshake: %d %s", code, raw)
	}
	if code, raw := post(`{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}`); code != http.StatusOK || rpcCodes(t, raw)[0] != 0 {
		t.Fatalf("initialize: %d %s", code, raw)
	}
	if code, raw := post(escalate("8")); code != http.StatusOK || rpcCodes(t, raw)[0] != 0 {
		t.Errorf("tools/call after initialize: %d %s", code, raw)
	}
	if n := auditedEscalations(t, data); n != 1 {
		t.Errorf("%d escalations audited, want the one after initialize", n)
	}
}

// TestAttackToolCallBeforeInitializeStdio: `toolgate bridge --stdio` refuses a
// tools/call before initialize (-32600) and runs nothing; after initialize a
// second initialize on the connection is refused too.
func TestAttackToolCallBeforeInitializeStdio(t *testing.T) {
	data := testenv.PrivateDir(t)
	cmd := exec.Command(testenv.Binary(t), "bridge", "--stdio", "--data-dir", data)
	cmd.Stdin = strings.NewReader(strings.Join([]string{
		escalate("1"),
		`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}`,
	}, "\n") + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("toolgate bridge --stdio: %v\n%s", err, stderr.String())
	}
	var codes []float64
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		codes = append(codes, rpcCodes(t, sc.Bytes())...)
	}
	if len(codes) != 3 || codes[0] != -32600 || codes[1] != 0 || codes[2] != -32600 {
		t.Errorf("answers %s: want -32600, a result, -32600", out)
	}
	if n := auditedEscalations(t, data); n != 0 {
		t.Errorf("%d escalations ran before initialize", n)
	}
}
