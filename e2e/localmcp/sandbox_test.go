package localmcp

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

func execBinary(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(testenv.Binary(t), args...)
	cmd.Env = baseEnv(t)
	return cmd
}

func envWith(env []string, kv string) []string {
	k := kv[:strings.IndexByte(kv, '=')+1]
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, k) {
			out = append(out, e)
		}
	}
	return append(out, kv)
}

// Without --workspace the tools get a fresh private folder under TMPDIR/toolgate/workspace,
// never the current directory.
func TestNoWorkspaceUsesFreshSandbox(t *testing.T) {
	tmp := t.TempDir()
	cwd := t.TempDir()
	env := envWith(baseEnv(t), "TMPDIR="+tmp)
	run := func() (*server, string) {
		s := startArgs(t, env, "/bin/sh", "-c", `cd "$1" && shift && exec "$@"`, "sh", cwd, testenv.Binary(t), "mcp")
		s.ok(pWrite, map[string]any{"path": "hello.txt", "content": "hi"})
		ents, _ := filepath.Glob(filepath.Join(tmp, "toolgate", "workspace", "*", "hello.txt"))
		return s, strings.Join(ents, ",")
	}
	s1, first := run()
	_, second := run()
	if first == "" || strings.Count(second, ",") != 1 || !strings.Contains(s1.stderr.String(), "fresh sandbox folder") {
		t.Errorf("runs did not get separate fresh folders: %q then %q; stderr %q", first, second, s1.stderr.String())
	}
	if _, err := os.Stat(filepath.Join(cwd, "hello.txt")); err == nil {
		t.Errorf("wrote into the current directory")
	}
	dir := filepath.Dir(first)
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("sandbox folder mode = %v, %v", fi.Mode(), err)
	}
}

// If the sandbox folder cannot be made, only the control plane is served and stderr says why.
func TestNoWorkspaceFallbackToControlPlane(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notDir, nil, 0o644)
	env := envWith(baseEnv(t), "TMPDIR="+notDir)
	s := startArgs(t, env, testenv.Binary(t), "mcp")
	names := s.names()
	if slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "toolgate_local_") }) ||
		!slices.Contains(names, "toolgate_server_status") {
		t.Errorf("fallback catalogue = %v", names)
	}
	if !strings.Contains(s.stderr.String(), "local tools disabled") {
		t.Errorf("stderr = %q", s.stderr.String())
	}
	if st := s.ok("toolgate_server_status", map[string]any{}); !strings.Contains(st, "local_tools_disabled") {
		t.Errorf("status = %s", st)
	}
}

// Stdout carries JSON-RPC only, even when toolgate has warnings to give (no workspace,
// an invalid declarative tool file).
func TestStdoutIsProtocolOnly(t *testing.T) {
	w := newWorld(t)
	os.MkdirAll(filepath.Join(w.ws, ".agents", "tools", "main"), 0o755)
	os.WriteFile(filepath.Join(w.ws, ".agents", "tools", "main", "bad.json"), []byte("{not json"), 0o644)
	in := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"toolgate_local_read_file","arguments":{"path":"../secret"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"toolgate_server_status","arguments":{}}}`,
	}
	for _, args := range [][]string{{"mcp", "--workspace", w.ws, "--database-dir", w.data}, {"mcp", "--database-dir", w.data}} {
		out, stderr := rawLines(t, baseEnv(t), args, in)
		if len(out) != 4 {
			t.Errorf("%v: %d stdout lines, want 4:\n%s", args, len(out), strings.Join(out, "\n"))
		}
		for _, l := range out {
			mustJSONLine(t, l)
		}
		_ = stderr
	}
	w.unchanged(t)
}
