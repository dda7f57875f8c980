package tsclient

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testenv"
)

// goHashOverMCP is the Go side of the catalogHash comparison for `toolgate mcp`:
// the official Go SDK spawns the same command line and lists the catalogue.
func goHashOverMCP(t *testing.T, env []string, args []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.Command(testenv.Binary(t), args...)
	cmd.Env = env
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "tsclient-go-side", Version: "1"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, nil)
	if err != nil {
		t.Fatalf("Go SDK over toolgate mcp: %v", err)
	}
	defer cs.Close()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("Go SDK tools/list: %v", err)
	}
	h, _ := lt.Meta["toolgate/catalogHash"].(string)
	return h
}

// TestStdioMCP: the TypeScript SDK's StdioClientTransport spawns `toolgate mcp
// --workspace DIR`, as a harness does, with the default prefix and with
// --tool-prefix none. The session lists the local tools under that surface's
// names with the catalogHash the Go SDK sees for the same command, reads a file,
// writes one and reads it back, is refused paths outside the workspace
// (path_outside_workspace) and a call without its required argument
// (invalid_arguments), answers ask_user through the elicitation handler it
// registered (a server-to-client elicitation/create, the session-based era the
// SDK speaks), runs bash in the sandbox with structuredContent the SDK validates
// against the published outputSchema, and closing stdin ends toolgate mcp with
// exit code 0.
func TestStdioMCP(t *testing.T) {
	c := newTSClient(t)
	for _, tc := range []struct {
		name, prefix string
		flags        []string
	}{
		{"default prefix", "toolgate_local_", nil},
		{"no prefix", "", []string{"--tool-prefix", "none"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			ws, secret := newWorkspace(t)
			args := append([]string{"mcp", "--workspace", ws, "--database-dir", data}, tc.flags...)
			childEnv := map[string]string{"TOOLGATE_HOME": filepath.Join(t.TempDir(), "home"), "TMPDIR": t.TempDir()}
			goEnv := os.Environ()
			for k, v := range childEnv {
				goEnv = append(goEnv, k+"="+v)
			}
			goHash := goHashOverMCP(t, goEnv, args)

			p := tc.prefix
			s := c.run(t, spec{
				Transport: map[string]any{"kind": "stdio", "command": testenv.Binary(t), "args": args, "env": childEnv},
				Elicit:    &elicit{Prefix: "answer to: "},
				Steps: []map[string]any{
					list(),
					call(p+"read_file", map[string]any{"path": "docs/a.md"}),
					call(p+"write_file", map[string]any{"path": "docs/new.md", "content": "fresh\n"}),
					call(p+"read_file", map[string]any{"path": "docs/new.md"}),
					call(p+"read_file", map[string]any{"path": "../secret"}),
					call(p+"write_file", map[string]any{"path": secret, "content": "pwned"}),
					call(p+"read_file", map[string]any{}),
					call(p+"ask_user", map[string]any{"question": "Proceed with merge?"}),
					call(p+"bash", map[string]any{"command": "printf hi; cat docs/new.md >&2"}),
					closeOp(),
				},
			})
			mustOK(t, s, 10)
			checkNegotiated(t, s, false)
			if s.SessionID != "" {
				t.Errorf("a stdio session has a session id %q", s.SessionID)
			}
			checkList(t, s.Steps[0], nil, goHash)
			names := s.Steps[0].Names
			for _, want := range []string{p + "read_file", p + "write_file", p + "list_files", p + "patch_file", p + "ask_user", "toolgate_server_status"} {
				if !slices.Contains(names, want) {
					t.Errorf("catalogue %q lacks %s", names, want)
				}
			}
			for _, n := range names {
				if strings.Contains(n, ".") {
					t.Errorf("toolgate mcp published the canonical id %s", n)
				}
			}
			checkAllowed(t, s.Steps[1], "alpha\n")
			if st := s.Steps[2]; st.Result == nil || st.Result.IsError || !strings.Contains(st.Result.text(), "docs/new.md") {
				t.Errorf("write_file = %+v", st)
			}
			if b, err := os.ReadFile(filepath.Join(ws, "docs", "new.md")); err != nil || string(b) != "fresh\n" {
				t.Errorf("written file = %q, %v", b, err)
			}
			checkAllowed(t, s.Steps[3], "fresh\n")
			checkRefused(t, s.Steps[4], "denied", "path_outside_workspace")
			checkRefused(t, s.Steps[5], "denied", "path_outside_workspace")
			if strings.Contains(s.Steps[4].Result.text(), "outside secret") {
				t.Errorf("the refusal leaked the file: %q", s.Steps[4].Result.text())
			}
			if b, _ := os.ReadFile(secret); string(b) != "outside secret\n" {
				t.Errorf("the file outside the workspace changed: %q", b)
			}
			checkRefused(t, s.Steps[6], "failed", "invalid_arguments")
			checkAllowed(t, s.Steps[7], "answer to: Proceed with merge?")
			if len(s.Asked) != 1 || s.Asked[0] != "Proceed with merge?" {
				t.Errorf("the elicitation handler was asked %q", s.Asked)
			}
			// bash declares an outputSchema: the SDK validated the structuredContent
			// it returned against it (callTool throws on a mismatch).
			if !slices.Contains(s.Steps[0].WithOutputSchema, p+"bash") {
				t.Errorf("bash publishes no outputSchema: %q", s.Steps[0].WithOutputSchema)
			}
			if st := s.Steps[8]; st.Thrown != "" || st.Result == nil || st.Result.IsError ||
				st.Result.StructuredContent["stdout"] != "hi" || st.Result.StructuredContent["stderr"] != "fresh\n" ||
				st.Result.StructuredContent["exit_code"] != float64(0) {
				t.Errorf("bash = %+v", st)
			}
			if cl := s.Steps[9]; cl.ExitCode == nil || *cl.ExitCode != 0 || cl.SignalCode != nil {
				t.Errorf("toolgate mcp after stdin closed: exit %v signal %v", cl.ExitCode, cl.SignalCode)
			}
		})
	}
}
