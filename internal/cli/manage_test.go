package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/mgmt/mgmttest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// withManager points the management commands at m for one test, acting as the owner.
func withManager(t *testing.T, m mgmt.Manager) {
	t.Helper()
	prev := openManager
	openManager = func(context.Context, *Env) (mgmt.Manager, mgmt.Caller, func() error, error) {
		return m, mgmt.Caller{Principal: "default", Owner: true}, nil, nil
	}
	t.Cleanup(func() { openManager = prev })
}

// daemonClient serves m over /v1/rpc as toolgate serve does and returns a client of it.
func daemonClient(t *testing.T, m mgmt.Manager) *mgmt.Client {
	t.Helper()
	h, err := mgmt.NewHandler(mgmt.Options{Manager: m, Authenticate: func(_ context.Context, tok string) (mgmt.Caller, bool, bool) {
		return mgmt.Caller{Principal: "default", Owner: true}, tok == "owner", tok == "owner"
	}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(mgmt.Path, h)
	srv := httptest.NewServer(mcpserver.Guard(mux, nil))
	t.Cleanup(func() { srv.Close(); _ = h.Close() })
	return mgmt.NewClient(srv.URL, "owner", nil)
}

func runManage(t *testing.T, stdin string, args ...string) (code int, out, errOut string) {
	t.Helper()
	var o, e bytes.Buffer
	code = Run(context.Background(), args, Stdio{In: strings.NewReader(stdin), Out: &o, Err: &e})
	return code, o.String(), e.String()
}

// TestManageInProcess: with no daemon serving the data directory, the commands open it
// themselves (the real app, not a fake) and answer from it.
func TestManageInProcess(t *testing.T) {
	t.Setenv("TOOLGATE_HOME", testenv.PrivateDir(t))
	if code, out, errOut := runManage(t, "", "ls"); code != 0 || !strings.HasPrefix(out, "no MCP servers installed") {
		t.Errorf("ls: code %d, out %q, err %q", code, out, errOut)
	}
	if code, out, _ := runManage(t, `{"mcpServers":{}}`, "install", "-"); code != 1 || !strings.Contains(out, "status: validation_error") {
		t.Errorf("install of nothing: code %d, out %q", code, out)
	}
	for _, args := range [][]string{{"details", "x"}, {"restart", "x"}, {"uninstall", "x"}, {"policy", "set", "x", "--enabled=false"}} {
		code, out, errOut := runManage(t, "", args...)
		if code != 1 || out != "" || !strings.Contains(errOut, `no server "x" installed`) {
			t.Errorf("%v: code %d, out %q, err %q", args, code, out, errOut)
		}
	}
}

func TestLs(t *testing.T) {
	withManager(t, mgmttest.NewSeeded())
	code, out, errOut := runManage(t, "", "ls")
	want := "NAME        SCOPE      STATUS  ENABLED  IMPLICIT  TOOLS  TRANSPORT   ID\n" +
		"filesystem  workspace  ready   yes      no        4      stdio: npx  mcp_000000000000000001\n"
	if code != 0 || out != want || errOut != "" {
		t.Fatalf("code %d err %q out:\n%s\nwant:\n%s", code, errOut, out, want)
	}
	withManager(t, mgmttest.New())
	if _, out, _ := runManage(t, "", "ls"); !strings.HasPrefix(out, "no MCP servers installed") {
		t.Fatalf("empty ls: %q", out)
	}
}

// --json prints the protocol's result, byte for byte the same in-process and through
// the daemon.
func TestJSONSameInProcessAndThroughDaemon(t *testing.T) {
	for _, args := range [][]string{
		{"ls", "--json"},
		{"details", "filesystem", "--json"},
		{"details", "mcp_000000000000000001", "--json"},
		{"policy", "set", "filesystem", "--allow-implicit-invocation", "--json"},
		{"restart", "filesystem", "--json"},
		{"uninstall", "filesystem", "--json"},
	} {
		withManager(t, mgmttest.NewSeeded())
		code, local, errOut := runManage(t, "", args...)
		if code != 0 || errOut != "" || !strings.HasPrefix(local, "{") {
			t.Fatalf("%v in-process: code %d, err %q, out %q", args, code, errOut, local)
		}
		withManager(t, daemonClient(t, mgmttest.NewSeeded()))
		code, remote, errOut := runManage(t, "", args...)
		if code != 0 || errOut != "" || remote != local {
			t.Fatalf("%v through the daemon: code %d, err %q\n%s\nin-process:\n%s", args, code, errOut, remote, local)
		}
	}
}

func TestInstall(t *testing.T) {
	fake := mgmttest.New()
	withManager(t, fake)
	dir := t.TempDir()
	file := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(file, []byte(`{"mcpServers":{"memory":{"command":"npx","args":["-y","@modelcontextprotocol/server-memory"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runManage(t, "", "install", file)
	want := "installed  memory (mcp_000000000000000001)\nstatus: ok (1 of 1 server valid); 1 audit event written\n"
	if code != 0 || out != want || errOut != "" {
		t.Fatalf("code %d err %q out:\n%s\nwant:\n%s", code, errOut, out, want)
	}
	// Flags not given are not sent: the protocol's defaults apply.
	p := fake.Calls()[0].Params.(mgmt.InstallParams)
	if p.Enabled != nil || p.AllowImplicitInvocation != nil || p.ScopeKind != mgmt.ScopeWorkspace {
		t.Fatalf("params %+v", p)
	}

	// From stdin, partially valid: every outcome and diagnostic printed, exit status 1.
	code, out, _ = runManage(t, `{"mcpServers":{"fs":{"command":"npx"},"broken":{"args":["x"]}}}`,
		"install", "-", "--scope", "user", "--enabled=false", "--allow-implicit-invocation")
	want = "installed         fs (mcp_000000000000000002)\n" +
		"validation_error  broken\n" +
		"                    mcpServers.broken: needs command (to run a stdio server) or url (to reach an HTTP server)\n" +
		"status: partial (1 of 2 servers valid); 1 audit event written\n"
	if code != 1 || out != want {
		t.Fatalf("code %d out:\n%s\nwant:\n%s", code, out, want)
	}
	p = fake.Calls()[1].Params.(mgmt.InstallParams)
	if p.ScopeKind != mgmt.ScopeUser || p.EnabledValue() || !p.ImplicitValue() {
		t.Fatalf("params %+v", p)
	}

	// A bad scope is the protocol's validation error, in-process as through the daemon.
	code, _, errOut = runManage(t, "{}", "install", "-", "--scope", "global")
	if code != 1 || !strings.Contains(errOut, `scope_kind must be "workspace" or "user"`) {
		t.Fatalf("bad scope: code %d err %q", code, errOut)
	}
	code, _, errOut = runManage(t, "", "install", filepath.Join(dir, "missing.json"))
	if code != 1 || !strings.Contains(errOut, "reading the config") {
		t.Fatalf("missing file: code %d err %q", code, errOut)
	}
}

func TestInstallTooLarge(t *testing.T) {
	withManager(t, mgmttest.New())
	code, _, errOut := runManage(t, strings.Repeat(" ", 1<<20+1), "install", "-")
	if code != 1 || !strings.Contains(errOut, "larger than") {
		t.Fatalf("code %d err %q", code, errOut)
	}
}

func TestPolicySet(t *testing.T) {
	fake := mgmttest.NewSeeded()
	withManager(t, fake)
	if code, _, errOut := runManage(t, "", "policy", "set", "filesystem"); code != 1 || !strings.Contains(errOut, "give --enabled") {
		t.Fatalf("no flags: code %d err %q", code, errOut)
	}
	code, out, _ := runManage(t, "", "policy", "set", "filesystem", "--enabled=false")
	if code != 0 || out != "filesystem: policy changed: disabled, implicit invocation off (1 audit event written)\n" {
		t.Fatalf("code %d out %q", code, out)
	}
	p := fake.Calls()[0].Params.(mgmt.PolicySetParams)
	if p.Enabled == nil || *p.Enabled || p.AllowImplicitInvocation != nil {
		t.Fatalf("params %+v: the flag not given must be left out", p)
	}
	_, out, _ = runManage(t, "", "policy", "set", "filesystem", "--enabled=false")
	if out != "filesystem: policy unchanged: disabled, implicit invocation off (0 audit events written)\n" {
		t.Fatalf("out %q", out)
	}
	code, _, errOut := runManage(t, "", "restart", "filesystem")
	if code != 1 || !strings.Contains(errOut, "is disabled") {
		t.Fatalf("restart of a disabled server: code %d err %q", code, errOut)
	}
}

func TestRestartUninstall(t *testing.T) {
	withManager(t, mgmttest.NewSeeded())
	if code, out, _ := runManage(t, "", "restart", "mcp_000000000000000001"); code != 0 ||
		out != "filesystem: restart accepted (now restarting); toolgate ls shows the state it reaches\n" {
		t.Fatalf("restart: %d %q", code, out)
	}
	if code, out, _ := runManage(t, "", "uninstall", "filesystem"); code != 0 ||
		out != "filesystem (mcp_000000000000000001): uninstalled; its past calls and audit events are kept\n" {
		t.Fatalf("uninstall: %d %q", code, out)
	}
	if code, _, errOut := runManage(t, "", "uninstall", "filesystem"); code != 1 || !strings.Contains(errOut, `unknown server: no workspace server named "filesystem"`) {
		t.Fatalf("again: %d %q", code, errOut)
	}
}

func TestDetails(t *testing.T) {
	withManager(t, mgmttest.NewSeeded())
	code, out, _ := runManage(t, "", "details", "filesystem")
	want := `filesystem (mcp_000000000000000001)  Filesystem
  scope        workspace
  status       ready (runtime ready, live, last seen 2026-05-04T13:06:40Z)
  policy       enabled, implicit invocation off
  required     no
  transport    stdio: npx
  fingerprint  sha256:4c1f0e6f1a7c2b9d8e3f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f809

Health
  state       ready (started, since 2026-05-04T13:05:40Z)
  last error  -
  retry       0 attempts, 0 failures in the window; circuit closed; next attempt -
  catalogue   version 3, fetched 2026-05-04T13:05:41Z
  stderr tail
    Secure MCP Filesystem Server running on stdio

Tools (4)
  CALLABLE                   NAME            TITLE           INPUT                           ANNOTATIONS                                    DESCRIPTION
  filesystem.read_file       read_file       Read File       path*                           {"readOnlyHint":true}                          Read the complete contents of a file.
  filesystem.write_file      write_file      Write File      content* path*                  {"destructiveHint":true,"readOnlyHint":false}  Create or overwrite a file.
  filesystem.list_directory  list_directory  List Directory  path*                           {"readOnlyHint":true}                          List the entries of a directory.
  filesystem.search_files    search_files    Search Files    excludePatterns path* pattern*  {"readOnlyHint":true}                          Find files whose names match a pattern.

Resources (0)

Resource templates (0)

Prompts (0)

Recent audit (2)
  SEQ  TIME                  PRINCIPAL  TOOL                  DECISION  CODE
  41   2026-05-04T13:04:40Z  default    toolgate.mcp_install  allowed   -
  42   2026-05-04T13:06:10Z  default    filesystem.read_file  allowed   -

Recent bindings (1)
  CALLABLE              RAW NAME   FIRST SEEN            LAST SEEN
  filesystem.read_file  read_file  2026-05-04T13:05:41Z  2026-05-04T13:06:10Z
`
	if code != 0 || out != want {
		t.Fatalf("code %d out:\n%s\nwant:\n%s", code, out, want)
	}
}

// hostileDetails is a server whose upstream sent terminal escapes and bidi controls in
// the texts details prints.
type hostileDetails struct{ *mgmttest.Manager }

func (h hostileDetails) Details(ctx context.Context, c mgmt.Caller, p mgmt.DetailsParams) (*mgmt.DetailsResult, error) {
	d, err := h.Manager.Details(ctx, c, p)
	if err != nil {
		return nil, err
	}
	d.Catalog.Tools[0].Description = "reads\x1b[2J\x1b[Hfiles\u202eevil"
	d.Catalog.Tools[0].Title = "Read\rFile"
	d.Health.StderrTail = "boot\n\x1b]0;owned\x07\n"
	return d, nil
}

func TestDetailsEscapesUpstreamText(t *testing.T) {
	withManager(t, hostileDetails{mgmttest.NewSeeded()})
	code, out, _ := runManage(t, "", "details", "filesystem")
	if code != 0 || strings.ContainsAny(out, "\x1b\r\x07\u202e") {
		t.Fatalf("control characters reached the terminal: %q", out)
	}
	for _, want := range []string{`reads\u{001B}[2J\u{001B}[Hfiles\u{202E}evil`, `Read\rFile`, `\u{001B}]0;owned\u{0007}`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
}
