package cli_test

import (
	"path/filepath"
	"strings"
	"testing"
)

// --capability mcpServer=NAME and mcpTool=SERVER/RAW_TOOL are selections: malformed
// ones are refused before anything starts, well-formed ones are reported on stderr
// (here rejected: no such server is installed).
func TestCapabilitySelections(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	for _, bad := range []string{"mcpTool=resend", "mcpTool=resend/", "mcpServer=Not A Name", "skill=x", "mcpserver=resend"} {
		r := runStoreCLI(t, dir, "mcp", "--no-local-tools", "--capability", bad)
		if r.code == 0 || !strings.Contains(r.errOut, "--capability") {
			t.Errorf("--capability %s: code %d, stderr %q", bad, r.code, r.errOut)
		}
	}
	r := runStoreCLI(t, dir, "mcp", "--no-local-tools", "--capability", "mcpServer=resend",
		"--capability", "mcpTool=resend/send_email", "--capability", "server.*")
	if r.code != 0 {
		t.Fatalf("code %d, stderr %s", r.code, r.errOut)
	}
	for _, want := range []string{
		`--capability mcpServer=resend rejected (unknown_server): no server "resend" is installed`,
		`--capability mcpTool=resend/send_email rejected (unknown_server)`,
	} {
		if !strings.Contains(r.errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.errOut)
		}
	}
	a := runStoreCLI(t, dir, "audit", "--json")
	if !strings.Contains(a.out, `"code":"selection_rejected"`) {
		t.Errorf("the rejected selections are not audited:\n%s", a.out)
	}
}

// toolgate bridge --server NAME refuses a server that is not installed, naming it.
func TestBridgeServerNotInstalled(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	r := runStoreCLI(t, dir, "bridge", "--stdio", "--server", "resend")
	if r.code == 0 || !strings.Contains(r.errOut, `--server resend: no server "resend" is installed`) {
		t.Errorf("code %d, stderr %q", r.code, r.errOut)
	}
	r = runStoreCLI(t, dir, "bridge", "--stdio", "--server", "Bad Name")
	if r.code == 0 || !strings.Contains(r.errOut, "is not a server name") {
		t.Errorf("code %d, stderr %q", r.code, r.errOut)
	}
}
