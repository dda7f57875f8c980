package serve

import (
	"database/sql"
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	_ "modernc.org/sqlite"
)

// The shell commands work against a running daemon: a token minted by `toolgate token
// mint` authenticates, a grant added by `toolgate grant add` reaches the next turn,
// `grant rm` takes it away, and `toolgate audit --verify` catches an edited event.
func TestShellCommandsAgainstTheDaemon(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	d := startServe(t, data, workspaceDir(t))

	tok, errOut, code := run(t, data, "token", "mint", "--principal", "carol", "--ttl", "10m")
	tok = strings.TrimSpace(tok)
	if code != 0 || tok == "" || strings.Contains(tok, "\n") {
		t.Fatalf("token mint: %d %q %s", code, tok, errOut)
	}
	list := func() []string {
		status, _, body := request(t, "GET", d.url+"/v1/tools", tok, "")
		if status != 200 {
			t.Fatalf("list as carol: %d %s", status, body)
		}
		return toolNames(t, body)
	}
	if n := list(); len(n) != 0 {
		t.Fatalf("carol without grants sees %v", n)
	}
	out, errOut, code := run(t, data, "grant", "add", "--principal", "carol", "--tool", "local.read_file", "--action", "read", "--resource", "path:docs/")
	if code != 0 {
		t.Fatalf("grant add: %d %s %s", code, out, errOut)
	}
	if n := list(); !slices.Equal(n, []string{"local.read_file"}) {
		t.Fatalf("after grant add carol sees %v", n)
	}
	invoke := func(path string) string {
		_, _, body := request(t, "POST", d.url+"/v1/tools/invoke", tok, `{"name":"local.read_file","arguments":{"path":"`+path+`"}}`)
		return string(body)
	}
	if r := invoke("docs/a.md"); !strings.Contains(r, "alpha") {
		t.Errorf("granted read: %s", r)
	}
	// The local tools refuse ".." outright; either way the scoped grant does not cover it.
	if r := invoke("docs/../src/x.go"); !strings.Contains(r, `"toolgate/status":"denied"`) || strings.Contains(r, "package x") {
		t.Errorf("read outside the scoped grant: %s", r)
	}
	if r := invoke("src/x.go"); !strings.Contains(r, "no_matching_grant") {
		t.Errorf("read outside the scoped grant: %s", r)
	}
	// An explicit deny added from the shell wins over the allow.
	if _, errOut, code := run(t, data, "grant", "add", "--principal", "carol", "--tool", "local.read_file", "--resource", "path:docs/a.md", "--deny"); code != 0 {
		t.Fatalf("grant add --deny: %s", errOut)
	}
	if r := invoke("docs/a.md"); !strings.Contains(r, "explicit_deny") {
		t.Errorf("denied read: %s", r)
	}

	// The chain verifies, then an edited event is caught.
	if out, errOut, code := run(t, data, "audit", "--verify"); code != 0 {
		t.Fatalf("audit --verify on an intact chain: %d %s %s", code, out, errOut)
	}
	out, _, _ = run(t, data, "audit", "--json", "--principal", "carol")
	if c := strings.Count(out, "\n"); c != 4 {
		t.Errorf("carol's audit events: %d lines\n%s", c, out)
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", filepath.Join(data, "toolgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Exec(`UPDATE audit_events SET decision = 'allowed' WHERE decision = 'denied' AND principal = 'carol' AND code = 'explicit_deny'`)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("edited %d rows", n)
	}
	var seq int
	db.QueryRow(`SELECT seq FROM audit_events WHERE principal = 'carol' AND code = 'explicit_deny'`).Scan(&seq)
	db.Close()
	out, errOut, code = run(t, data, "audit", "--verify")
	if code != 2 || !strings.Contains(out+errOut, "seq "+strconv.Itoa(seq)) {
		t.Errorf("audit --verify after an edit: exit %d, %s %s (want 2 naming seq %d)", code, out, errOut, seq)
	}
}

// Each gate hides a tool from a running daemon's next turn: no grant, a disabled
// namespace (from the shell), and registration (no --workspace, no local tools).
func TestGatesThroughTheDaemon(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	d := startServe(t, data, workspaceDir(t))
	owner := d.ownerToken()
	names := func() []string {
		_, _, body := request(t, "GET", d.url+"/v1/tools", owner, "")
		return toolNames(t, body)
	}
	if n := names(); !slices.Contains(n, "local.read_file") {
		t.Fatalf("default catalogue %v", n)
	}
	if out, errOut, code := run(t, data, "namespaces", "disable", "local"); code != 0 || out != "local disabled\n" {
		t.Fatalf("disable: %d %q %s", code, out, errOut)
	}
	for _, n := range names() {
		if strings.HasPrefix(n, "local.") {
			t.Errorf("disabled namespace still published: %s", n)
		}
	}
	_, _, body := request(t, "POST", d.url+"/v1/tools/invoke", owner, `{"name":"local.read_file","arguments":{"path":"docs/a.md"}}`)
	if !strings.Contains(string(body), `"toolgate/code":"tool_unavailable"`) {
		t.Errorf("call into a disabled namespace: %s", body)
	}
	out, _, _ := run(t, data, "audit", "--json", "--tool", "local.read_file")
	if !strings.Contains(out, "namespace_disabled") {
		t.Errorf("audit does not say namespace_disabled: %s", out)
	}
	if out, _, _ := run(t, data, "namespaces", "ls"); !strings.Contains(out, "local") || !strings.Contains(out, "disabled") {
		t.Errorf("namespaces ls: %s", out)
	}
	run(t, data, "namespaces", "enable", "local")
	if n := names(); !slices.Contains(n, "local.read_file") {
		t.Errorf("re-enabled namespace: %v", n)
	}
	if _, _, code := run(t, data, "namespaces", "disable", "Bad NS"); code == 0 {
		t.Errorf("an invalid namespace was accepted")
	}
	// Grant gate: remove the default local.* grant from the shell.
	out, _, _ = run(t, data, "grant", "ls", "--json")
	var grants []struct{ ID, Tool string }
	if err := json.Unmarshal([]byte(out), &grants); err != nil {
		t.Fatalf("grant ls --json: %v\n%s", err, out)
	}
	var id string
	for _, g := range grants {
		if g.Tool == "local.*" {
			id = g.ID
		}
	}
	if id == "" {
		t.Fatalf("no local.* grant in %s", out)
	}
	if _, errOut, code := run(t, data, "grant", "rm", id); code != 0 {
		t.Fatalf("grant rm: %s", errOut)
	}
	for _, n := range names() {
		if strings.HasPrefix(n, "local.") {
			t.Errorf("ungranted tool still published: %s", n)
		}
	}
	// Registration gate: without --workspace there are no local tools to publish.
	d.stop(syscall.SIGTERM)
	run(t, data, "grant", "add", "--principal", "default", "--tool", "local.*")
	d2 := startServe(t, data, "")
	_, _, body = request(t, "GET", d2.url+"/v1/tools", owner, "")
	for _, n := range toolNames(t, body) {
		if strings.HasPrefix(n, "local.") {
			t.Errorf("unregistered tool published: %s", n)
		}
	}
}
