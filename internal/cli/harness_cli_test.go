package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/testenv"
)

func runCLI(t *testing.T, args ...string) (code int, out, errOut string) {
	t.Helper()
	var o, e bytes.Buffer
	code = cli.Run(context.Background(), append([]string{"--data-dir", testenv.PrivateDir(t)}, args...),
		cli.Stdio{In: strings.NewReader(""), Out: &o, Err: &e})
	return code, o.String(), e.String()
}

func TestHarnessCommandsRefuseBadInput(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notDir, []byte("x"), 0o600)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"config", "claude-code", "--stdio", "--http", "http://127.0.0.1:1/mcp"}, "contradict"},
		{[]string{"config", "claude-code", "--http", "http://127.0.0.1:1/mcp", "--ttl", "0s"}, "--ttl"},
		{[]string{"config", "claude-code", "--http", "ftp://x"}, "http://"},
		{[]string{"config", "claude-code", "--workspace", notDir}, "not a directory"},
		{[]string{"config", "claude-code", "--principal", " "}, "--principal"},
		{[]string{"config", "claude-code", "--no-token"}, "--no-token"},
		{[]string{"config", "claude-code", "--name", "bad name"}, "server name"},
		{[]string{"config", "nope"}, "unknown harness"},
		{[]string{"config"}, "accepts 1 arg"},
		{[]string{"alias", "claude-code", ""}, "non-empty"},
		{[]string{"alias", "claude-code", "a\nb"}, "one line"},
		{[]string{"alias", "claude-code", "x", "--name", "a__b"}, "server name"},
		{[]string{"alias", "nope", "x"}, "unknown harness"},
		{[]string{"connect", "claude-agent-sdk"}, "no config file"},
		{[]string{"connect", "claude-code", "--undo", "--dry-run", "--file", filepath.Join(t.TempDir(), "x.json")}, "contradict"},
		{[]string{"connect", "claude-code", "--undo", "--file", filepath.Join(t.TempDir(), "x.json")}, "nothing to undo"},
		{[]string{"run", "--harness", "claude-code", "--principal", "", "--", "true"}, "--principal"},
	}
	for _, c := range cases {
		code, _, errOut := runCLI(t, c.args...)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want an error mentioning %q", c.args, code, errOut, c.want)
		}
	}
}

func TestConfigPrintsEveryHarness(t *testing.T) {
	ws := t.TempDir()
	for _, h := range []string{"claude-code", "claude-agent-sdk", "claude-desktop", "codex", "cursor", "deepseek", "gemini", "goose", "opencode", "pi", "vscode"} {
		code, out, errOut := runCLI(t, "config", h, "--workspace", ws, "--no-check")
		if code != 0 || !strings.Contains(out, ws) || !strings.Contains(out, "--database-dir") {
			t.Errorf("config %s: exit %d\n%s\n%s", h, code, out, errOut)
		}
	}
	code, out, errOut := runCLI(t, "config", "codex", "--http", "http://127.0.0.1:9/mcp", "--no-token")
	if code != 0 || strings.Contains(out, "Bearer") || !strings.Contains(out, "url = 'http://127.0.0.1:9/mcp'") {
		t.Errorf("config codex --no-token: %d\n%s\n%s", code, out, errOut)
	}
}
