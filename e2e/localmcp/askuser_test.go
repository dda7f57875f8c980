package localmcp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/localtools"
	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/workspace"
)

const askUser = "toolgate_local_ask_user"

// elicitingClient is a Go SDK client whose ElicitationHandler answers every
// question with "answer to: <question>" and records what it was asked.
func elicitingClient(asked *[]string) *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "localmcp-e2e", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			*asked = append(*asked, req.Params.Message)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "answer to: " + req.Params.Message}}, nil
		},
	})
}

// auditedAskUser returns the audit events of ask_user calls in data, oldest first.
func auditedAskUser(t *testing.T, data string) []map[string]any {
	t.Helper()
	return audited(t, data, "local.ask_user")
}

// audited returns the audit events of one tool's calls in data, oldest first.
func audited(t *testing.T, data, tool string) []map[string]any {
	t.Helper()
	out, err := exec.Command(testenv.Binary(t), "audit", "--json", "--data-dir", data, "--tool", tool).Output()
	if err != nil {
		t.Fatalf("toolgate audit: %v", err)
	}
	var evs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// The Go SDK client picks the stateless 2026-07-28 revision of `toolgate mcp`
// and its MRTR middleware resolves ask_user's input_required through the
// ElicitationHandler and retries: the person's answer comes back, and the two
// rounds are two audited calls. A client forced to initialize (the older era)
// gets the same answer through a server-to-client elicitation/create.
func TestAskUserBothErasOverStdio(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, era := range []struct {
		name    string
		opts    *mcp.ClientSessionOptions
		version string
		rounds  int
	}{
		{"2026-07-28", nil, mcpspec.ModernVersion, 2},
		{"initialize", &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}, mcpspec.LatestVersion, 1},
	} {
		t.Run(era.name, func(t *testing.T) {
			before := len(auditedAskUser(t, w.data))
			var asked []string
			stderr := &testenv.SyncBuffer{}
			cmd := exec.Command(testenv.Binary(t), "mcp", "--workspace", w.ws, "--database-dir", w.data)
			cmd.Env = baseEnv(t)
			cmd.Stderr = stderr
			cs, err := elicitingClient(&asked).Connect(ctx, &mcp.CommandTransport{Command: cmd}, era.opts)
			if err != nil {
				t.Fatalf("connect: %v\n%s", err, stderr)
			}
			defer cs.Close()
			if v := cs.InitializeResult().ProtocolVersion; v != era.version {
				t.Errorf("negotiated %q, want %q", v, era.version)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: askUser, Arguments: map[string]any{"question": "Proceed with merge?"}})
			if err != nil {
				t.Fatalf("ask_user: %v\n%s", err, stderr)
			}
			if res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "answer to: Proceed with merge?" {
				t.Errorf("ask_user = %+v", res)
			}
			if len(asked) != 1 || asked[0] != "Proceed with merge?" {
				t.Errorf("the person was asked %q", asked)
			}
			evs := auditedAskUser(t, w.data)[before:]
			if len(evs) != era.rounds {
				t.Fatalf("%d audit events for %d rounds: %v", len(evs), era.rounds, evs)
			}
			seen := map[any]bool{}
			for _, ev := range evs {
				if ev["decision"] != "allowed" || ev["transport"] != "stdio" || seen[ev["call_id"]] {
					t.Errorf("audit event %v", ev)
				}
				seen[ev["call_id"]] = true
			}
		})
	}
}

// rawStdio is `toolgate mcp` driven line by line.
type rawStdio struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Reader
}

func startRaw(t *testing.T, w *world) *rawStdio {
	t.Helper()
	cmd := exec.Command(testenv.Binary(t), "mcp", "--workspace", w.ws, "--database-dir", w.data)
	cmd.Env = baseEnv(t)
	stderr := &testenv.SyncBuffer{}
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close() // EOF ends toolgate mcp
		if err := cmd.Wait(); err != nil {
			t.Errorf("toolgate mcp: %v\n%s", err, stderr)
		}
	})
	return &rawStdio{t: t, in: in, out: bufio.NewReader(out)}
}

// roundTrip sends one line and returns the decoded answer.
func (r *rawStdio) roundTrip(line string) map[string]any {
	r.t.Helper()
	if _, err := io.WriteString(r.in, line+"\n"); err != nil {
		r.t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		l, _ := r.out.ReadString('\n')
		got <- l
	}()
	select {
	case l := <-got:
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			r.t.Fatalf("answer %q: %v", l, err)
		}
		return m
	case <-time.After(30 * time.Second):
		r.t.Fatalf("no answer to %s", line)
		return nil
	}
}

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}`

func askLine(id int, question string, extra string) string {
	q, _ := json.Marshal(question)
	return `{"jsonrpc":"2.0","id":` + itoa(id) + `,"method":"tools/call","params":{"name":"` + askUser +
		`","arguments":{"question":` + string(q) + `},` + extra + modernMeta + `}}`
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// resultOf checks that m is a result and returns it.
func resultOf(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	res, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("not a result: %v", m)
	}
	return res
}

func codeIn(res map[string]any) string {
	meta, _ := res["_meta"].(map[string]any)
	c, _ := meta["toolgate/code"].(string)
	return c
}

// On the wire: the first stateless call answers input_required (no
// server-to-client request is written), and a retry whose requestState was
// altered, or that changes the arguments, is a failed result with code
// invalid_request_state; the untouched state with the answer finishes the call.
func TestAskUserRequestStateOnTheWire(t *testing.T) {
	w := newWorld(t)
	r := startRaw(t, w)
	first := resultOf(t, r.roundTrip(askLine(1, "Ship it?", "")))
	if first["resultType"] != "input_required" {
		t.Fatalf("first round: %v", first)
	}
	ir, _ := first["inputRequests"].(map[string]any)["ask_user"].(map[string]any)
	params, _ := ir["params"].(map[string]any)
	if ir["method"] != "elicitation/create" || params["message"] != "Ship it?" || params["requestedSchema"] == nil {
		t.Errorf("inputRequests: %v", first["inputRequests"])
	}
	state, _ := first["requestState"].(string)
	if !strings.HasPrefix(state, "tg1.") || strings.Contains(state, "default") {
		t.Fatalf("requestState %q", state)
	}
	answer := `"inputResponses":{"ask_user":{"action":"accept","content":{"answer":"yes"}}},`
	withState := func(s string) string { b, _ := json.Marshal(s); return `"requestState":` + string(b) + `,` }

	// Tampered: one character of the sealed part changed.
	i := len(state) / 2
	c := byte('A')
	if state[i] == 'A' {
		c = 'B'
	}
	tampered := state[:i] + string(c) + state[i+1:]
	for _, bad := range []struct{ name, line, want string }{
		{"tampered", askLine(2, "Ship it?", answer+withState(tampered)), "altered"},
		{"forged", askLine(3, "Ship it?", answer+withState("tg1.eyJwIjoiZGVmYXVsdCJ9")), "altered"},
		{"not a string", askLine(4, "Ship it?", answer+`"requestState":{"p":"default"},`), "must be the string"},
		{"other arguments", askLine(5, "Delete the repository?", answer+withState(state)), "other arguments"},
	} {
		res := resultOf(t, r.roundTrip(bad.line))
		text, _ := json.Marshal(res["content"])
		if res["isError"] != true || codeIn(res) != "invalid_request_state" || !strings.Contains(string(text), bad.want) ||
			res["resultType"] != "complete" {
			t.Errorf("%s: %v", bad.name, res)
		}
	}
	res := resultOf(t, r.roundTrip(askLine(6, "Ship it?", answer+withState(state))))
	if res["isError"] != false || !strings.Contains(string(mustJSON(res["content"])), `"text":"yes"`) {
		t.Errorf("retry with the issued state: %v", res)
	}
	// A retry naming no state is asked again, never answered from the client's say-so.
	res = resultOf(t, r.roundTrip(askLine(7, "Ship it?", answer)))
	if res["resultType"] != "input_required" {
		t.Errorf("inputResponses without requestState: %v", res)
	}
	// Each round above was its own audited call: 7 ask_user events, the 4 refused
	// ones failed with the code.
	evs := auditedAskUser(t, w.data)
	failed := 0
	for _, ev := range evs {
		if ev["decision"] == "failed" && ev["code"] == "invalid_request_state" {
			failed++
		}
	}
	if len(evs) != 11 || failed != 4 {
		t.Errorf("audit: %d events, %d failed invalid_request_state: %v", len(evs), failed, evs)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// ask_user over Streamable HTTP bridges, with the real app and kernel in this
// process: the Go SDK client answers through MRTR (2026-07-28) or a
// server-to-client elicitation on the POST's SSE stream (initialize), and a
// requestState issued on alice's bridge is refused on bob's, though both run in
// the same process under the same key.
func TestAskUserOverHTTPBridge(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ws, err := workspace.Open(w.ws)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	tools, err := localtools.Build(localtools.Config{Workspace: ws, NoConfined: true, Tools: []string{"ask_user"}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.Open(ctx, app.Options{DataDir: w.data, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, p := range []string{"alice", "bob"} {
		if _, err := a.Store().AddGrant(ctx, policy.Grant{Principal: p, Tool: "local.ask_user", Action: "*", Resource: "*", Effect: policy.Allow, Note: "e2e"}); err != nil {
			t.Fatal(err)
		}
	}
	bridge := func(principal string) *mcpserver.Bridge {
		turn, err := a.OpenTurn(ctx, app.TurnRequest{Principal: principal, Transport: "http", Namer: localtools.Namer(localtools.DefaultPrefix)})
		if err != nil {
			t.Fatal(err)
		}
		b, err := mcpserver.NewBridge(turn, mcpserver.BridgeOptions{ServerInfo: mcpspec.Implementation{Name: "toolgate", Version: "e2e"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	alice, bob := bridge("alice"), bridge("bob")

	post := func(b *mcpserver.Bridge, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "POST", b.URL(), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", askUser)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") != "" {
			t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, raw)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		return resultOf(t, m)
	}
	first := post(alice, askLine(1, "Rebase?", ""))
	state, _ := first["requestState"].(string)
	if first["resultType"] != "input_required" || state == "" {
		t.Fatalf("first round on alice's bridge: %v", first)
	}
	sb, _ := json.Marshal(state)
	retry := askLine(2, "Rebase?", `"inputResponses":{"ask_user":{"action":"accept","content":{"answer":"yes"}}},"requestState":`+string(sb)+`,`)
	if res := post(bob, retry); res["isError"] != true || codeIn(res) != "invalid_request_state" ||
		!strings.Contains(string(mustJSON(res["content"])), "another principal") {
		t.Errorf("alice's state replayed by bob: %v", res)
	}
	if res := post(alice, retry); res["isError"] != false || !strings.Contains(string(mustJSON(res["content"])), `"text":"yes"`) {
		t.Errorf("alice's retry: %v", res)
	}

	// Last, because the older era ends the bridge (the SDK deletes its session
	// on Close).
	for _, era := range []struct {
		name    string
		opts    *mcp.ClientSessionOptions
		version string
	}{
		{"2026-07-28", nil, mcpspec.ModernVersion},
		{"initialize", &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}, mcpspec.LatestVersion},
	} {
		t.Run(era.name, func(t *testing.T) {
			var asked []string
			cs, err := elicitingClient(&asked).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: alice.URL(), MaxRetries: -1}, era.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if v := cs.InitializeResult().ProtocolVersion; v != era.version {
				t.Errorf("negotiated %q, want %q", v, era.version)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: askUser, Arguments: map[string]any{"question": "Rebase?"}})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError || res.Content[0].(*mcp.TextContent).Text != "answer to: Rebase?" || len(asked) != 1 {
				t.Errorf("ask_user = %+v, asked %q", res, asked)
			}
		})
	}
}
