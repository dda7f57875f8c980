package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/harness"
	"github.com/toolgate/toolgate/internal/localtools"
	"github.com/toolgate/toolgate/internal/store/storetest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// fakeHarnessOut names the file the fake harness writes what it saw to; when it is
// set, TestFakeHarnessProcess acts as the harness instead of skipping.
const fakeHarnessOut = "TOOLGATE_TEST_FAKE_HARNESS_OUT"

// fakeHarnessCalls is a JSON array of {name, args} the fake harness calls in order.
const fakeHarnessCalls = "TOOLGATE_TEST_FAKE_HARNESS_CALLS"

type seenCall struct {
	Name    string `json:"name"`
	IsError bool   `json:"isError"`
	Code    string `json:"code"`
	Text    string `json:"text"`
}

type seenTurn struct {
	Names []string   `json:"names"`
	Hash  string     `json:"hash"`
	Calls []seenCall `json:"calls"`
}

// TestFakeHarnessProcess is not a test of its own: toolgate run starts this test
// binary as an opencode stand-in (it finds its connection file in OPENCODE_CONFIG,
// as opencode does). It connects with the Go SDK client, lists the tools, makes the
// calls it was told to, and writes what it saw for the parent test to check.
func TestFakeHarnessProcess(t *testing.T) {
	out := os.Getenv(fakeHarnessOut)
	if out == "" {
		t.Skip("the harness stand-in of TestRunCapabilityNarrows")
	}
	var file struct {
		MCP map[string]struct {
			URL     string            `json:"url"`
			Headers map[string]string `json:"headers"`
		} `json:"mcp"`
	}
	b, err := os.ReadFile(os.Getenv("OPENCODE_CONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatalf("connection file: %v\n%s", err, b)
	}
	s := file.MCP["toolgate"]
	tr := &mcp.StreamableClientTransport{Endpoint: s.URL, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: headerTransport(s.Headers)}}
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fake-opencode", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connecting to %s: %v", s.URL, err)
	}
	defer cs.Close()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	seen := seenTurn{Names: []string{}}
	seen.Hash, _ = list.Meta["toolgate/catalogHash"].(string)
	for _, tool := range list.Tools {
		seen.Names = append(seen.Names, tool.Name)
	}
	var calls []struct {
		Name string         `json:"name"`
		Args map[string]any `json:"args"`
	}
	if err := json.Unmarshal([]byte(os.Getenv(fakeHarnessCalls)), &calls); err != nil {
		t.Fatal(err)
	}
	for _, c := range calls {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.Name, Arguments: c.Args})
		if err != nil {
			t.Fatalf("tools/call %s: %v", c.Name, err)
		}
		sc := seenCall{Name: c.Name, IsError: res.IsError}
		sc.Code, _ = res.Meta["toolgate/code"].(string)
		if len(res.Content) > 0 {
			if tc, ok := res.Content[0].(*mcp.TextContent); ok {
				sc.Text = tc.Text
			}
		}
		seen.Calls = append(seen.Calls, sc)
	}
	b, _ = json.Marshal(seen)
	if err := os.WriteFile(out, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestRunCapabilityNarrows runs one turn through `toolgate run --workspace W
// --capability …` with a real MCP client as the harness: the default grants allow
// every local tool, the capabilities narrow that to read_file (any action) and
// write_file (reads only). A tool outside the capabilities is absent from tools/list
// and refused on call exactly like an unpublished one; write_file is listed but a write
// through it is refused outside_capability; read_file works. The audit trail records
// why.
func TestRunCapabilityNarrows(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hi there\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := testenv.PrivateDir(t)
	out := filepath.Join(t.TempDir(), "seen.json")
	h, err := harness.Lookup("opencode")
	if err != nil {
		t.Fatal(err)
	}
	name := h.Namer(harness.DefaultServerName).Name
	calls := []map[string]any{
		{"name": name("local.read_file"), "args": map[string]any{"path": "hello.txt"}},
		{"name": name("local.write_file"), "args": map[string]any{"path": "new.txt", "content": "x"}},
		{"name": name("local.bash"), "args": map[string]any{"command": "true"}},
		{"name": name("local.no_such_tool"), "args": map[string]any{}},
		{"name": name("toolgate.escalate"), "args": map[string]any{"reason": "r"}},
	}
	cb, _ := json.Marshal(calls)
	t.Setenv(fakeHarnessOut, out)
	t.Setenv(fakeHarnessCalls, string(cb))
	t.Setenv("XDG_CACHE_HOME", t.TempDir())

	var stdout, stderr bytes.Buffer
	code := cli.Run(context.Background(), []string{"--data-dir", data, "run", "--harness", "opencode", "--workspace", ws,
		"--capability", "local.read_file", "--capability", "local.write_file:read",
		"--", os.Args[0], "-test.run=^TestFakeHarnessProcess$", "-test.count=1"},
		cli.Stdio{In: strings.NewReader(""), Out: &stdout, Err: &stderr})
	if code != 0 {
		t.Fatalf("toolgate run exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("the harness stand-in wrote nothing: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	var seen seenTurn
	if err := json.Unmarshal(b, &seen); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(seen.Names, ","), name("local.read_file")+","+name("local.write_file"); got != want {
		t.Errorf("tools/list = %s, want exactly %s", got, want)
	}
	if len(seen.Hash) != 64 {
		t.Errorf("catalogHash %q", seen.Hash)
	}
	if len(seen.Calls) != len(calls) {
		t.Fatalf("calls seen: %+v", seen.Calls)
	}
	if c := seen.Calls[0]; c.IsError || !strings.Contains(c.Text, "hi there") {
		t.Errorf("read_file inside the capability: %+v", c)
	}
	if c := seen.Calls[1]; !c.IsError || c.Code != "outside_capability" {
		t.Errorf("write through write_file:read: %+v, want outside_capability", c)
	}
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); !os.IsNotExist(err) {
		t.Errorf("the refused write happened: %v", err)
	}
	// Outside the capabilities, granted or not, and unknown: one indistinguishable answer.
	for _, c := range seen.Calls[2:] {
		if !c.IsError || c.Code != "tool_unavailable" {
			t.Errorf("%s: %+v, want tool_unavailable", c.Name, c)
		}
		if strings.Replace(c.Text, c.Name, "NAME", 1) != strings.Replace(seen.Calls[3].Text, seen.Calls[3].Name, "NAME", 1) {
			t.Errorf("%s answers %q, unlike an unknown tool's %q", c.Name, c.Text, seen.Calls[3].Text)
		}
	}
	if !strings.Contains(stderr.String(), "completed: 5 audit event(s): 1 allowed, 4 denied") {
		t.Errorf("no audit summary:\n%s", stderr.String())
	}

	evs := storetest.Trail(t, data)
	codes := map[string]string{}
	for _, e := range evs {
		codes[e.Tool] = e.Code
	}
	for tool, want := range map[string]string{
		"local.read_file":   "",
		"local.write_file":  "outside_capability",
		"local.bash":        "outside_capability", // granted, so the audit says why it was hidden
		"toolgate.escalate": "outside_capability",
	} {
		if got, ok := codes[tool]; !ok || got != want {
			t.Errorf("audit code for %s = %q (present %v), want %q", tool, got, ok, want)
		}
	}
}

// A malformed --capability is refused before anything starts, on every command that
// takes one.
func TestCapabilityFlagRefusals(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--harness", "opencode", "--capability", "local.read_file:delete", "--", "/nonexistent/harness"},
		{"bridge", "--capability", "local.read_file:delete"},
		{"mcp", "--no-local-tools", "--capability", "local.read_file:delete"},
	} {
		data := filepath.Join(t.TempDir(), "data")
		var stdout, stderr bytes.Buffer
		code := cli.Run(context.Background(), append([]string{"--data-dir", data}, args...),
			cli.Stdio{In: strings.NewReader(""), Out: &stdout, Err: &stderr})
		if code == 0 || !strings.Contains(stderr.String(), `--capability: invalid capability "local.read_file:delete": action "delete" is not read, write or execute`) {
			t.Errorf("%s: exit %d, stderr %q", args[0], code, stderr.String())
		}
		if stdout.Len() != 0 {
			t.Errorf("%s: wrote %q to stdout", args[0], stdout.String())
		}
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Errorf("%s: the data directory was created before the flags were checked", args[0])
		}
	}
	for _, cmd := range []string{"run", "bridge", "mcp"} {
		var stdout bytes.Buffer
		cli.Run(context.Background(), []string{cmd, "--help"}, cli.Stdio{In: strings.NewReader(""), Out: &stdout, Err: &stdout})
		if !strings.Contains(stdout.String(), "--capability PATTERN[:ACTION]") || !strings.Contains(stdout.String(), "outside_capability") {
			t.Errorf("%s --help does not document --capability:\n%s", cmd, stdout.String())
		}
	}
}

// TestMCPCapabilityNarrows: `toolgate mcp --capability …` over stdio publishes only the
// covered tools under its own names (toolgate_local_…), refuses a write through a
// read-only capability, and refuses a granted tool outside the capabilities like an
// unknown one.
func TestMCPCapabilityNarrows(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hi there\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		code := cli.Run(context.Background(), []string{"--data-dir", testenv.PrivateDir(t), "mcp", "--workspace", ws,
			"--capability", "local.read_file", "--capability", "local.write_file:read"},
			cli.Stdio{In: inR, Out: outW, Err: &stderr})
		outW.Close()
		inR.Close()
		done <- code
	}()
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		inW.Close()
		<-done
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	name := localtools.Namer(localtools.DefaultPrefix)
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	if got, want := strings.Join(names, ","), name("local.read_file")+","+name("local.write_file"); got != want {
		t.Errorf("tools/list = %s, want %s", got, want)
	}
	for _, c := range []struct {
		tool, code string
		args       map[string]any
	}{
		{name("local.read_file"), "", map[string]any{"path": "hello.txt"}},
		{name("local.write_file"), "outside_capability", map[string]any{"path": "x.txt", "content": "x"}},
		{name("local.bash"), "tool_unavailable", map[string]any{"command": "true"}},
		{name("toolgate.escalate"), "tool_unavailable", map[string]any{"reason": "r"}},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil {
			t.Fatalf("tools/call %s: %v", c.tool, err)
		}
		code, _ := res.Meta["toolgate/code"].(string)
		if res.IsError != (c.code != "") || code != c.code {
			t.Errorf("%s: isError %v code %q, want %q", c.tool, res.IsError, code, c.code)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "x.txt")); !os.IsNotExist(err) {
		t.Errorf("the refused write happened: %v", err)
	}
	_ = cs.Close()
	inW.Close()
	if code := <-done; code != 0 {
		t.Errorf("toolgate mcp exited %d\n%s", code, stderr.String())
	}
}
