package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

func TestGrantAddLsRm(t *testing.T) {
	dir := testenv.PrivateDir(t)
	r := runStoreCLI(t, dir, "grant", "add", "--principal", "alice", "--tool", "files.read", "--action", "read",
		"--resource", "path:docs/", "--note", "docs only")
	if r.code != 0 || r.errOut != "" {
		t.Fatalf("grant add: code %d, stderr %q", r.code, r.errOut)
	}
	id := strings.TrimSpace(r.out)
	if !strings.HasPrefix(id, "g_") || strings.Count(r.out, "\n") != 1 {
		t.Fatalf("grant add printed %q, want one grant id line", r.out)
	}
	r = runStoreCLI(t, dir, "grant", "add", "--principal", "*", "--tool", "bash.*", "--deny")
	if r.code != 0 {
		t.Fatalf("grant add --deny: %d %s", r.code, r.errOut)
	}
	denyID := strings.TrimSpace(r.out)

	r = runStoreCLI(t, dir, "grant", "ls")
	if r.code != 0 {
		t.Fatalf("grant ls: %d %s", r.code, r.errOut)
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("grant ls table:\n%s", r.out)
	}
	for _, want := range []string{id, "alice", "files.read", "path:docs/", "allow", "docs only"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("row %q lacks %q", lines[1], want)
		}
	}
	if !strings.Contains(lines[2], denyID) || !strings.Contains(lines[2], "deny") || !strings.Contains(lines[2], "bash.*") {
		t.Errorf("deny row %q", lines[2])
	}

	r = runStoreCLI(t, dir, "grant", "ls", "--json")
	var got []map[string]any
	if err := json.Unmarshal([]byte(r.out), &got); err != nil || r.code != 0 {
		t.Fatalf("grant ls --json: %v, %d, %q", err, r.code, r.out)
	}
	if len(got) != 2 || got[0]["id"] != id || got[0]["action"] != "read" || got[1]["effect"] != "deny" || got[1]["action"] != "*" {
		t.Errorf("grant ls --json = %v", got)
	}

	if r = runStoreCLI(t, dir, "grant", "rm", id); r.code != 0 || r.out != "" {
		t.Fatalf("grant rm: %d %q %q", r.code, r.out, r.errOut)
	}
	r = runStoreCLI(t, dir, "grant", "rm", id, denyID)
	if r.code == 0 || !strings.Contains(r.errOut, "no grant with id "+id) {
		t.Errorf("grant rm of a removed id: code %d, stderr %q", r.code, r.errOut)
	}
	// The known id in the same call was still removed.
	r = runStoreCLI(t, dir, "grant", "ls", "--json")
	if strings.TrimSpace(r.out) != "[]" {
		t.Errorf("after rm, grant ls --json = %q, want []", r.out)
	}
}

func TestGrantAddRefuses(t *testing.T) {
	dir := testenv.PrivateDir(t)
	cases := map[string]struct {
		args []string
		want string
	}{
		"no principal":     {[]string{"--tool", "files.read"}, `"principal" not set`},
		"no tool":          {[]string{"--principal", "a"}, `"tool" not set`},
		"bad action":       {[]string{"--principal", "a", "--tool", "files.read", "--action", "delete"}, "action"},
		"partial wildcard": {[]string{"--principal", "a", "--tool", "files.re*"}, `"*" is allowed only as "*" or "ns.*"`},
		"upper namespace":  {[]string{"--principal", "a", "--tool", "Files.read"}, "not a canonical id"},
		"dot-dot resource": {[]string{"--principal", "a", "--tool", "files.read", "--resource", "path:docs/../x"}, `is not normalised (write "path:x")`},
		"climbing prefix":  {[]string{"--principal", "a", "--tool", "files.read", "--resource", "path:docs/../../x/"}, "outside the workspace"},
		"absolute path":    {[]string{"--principal", "a", "--tool", "files.read", "--resource", "path:/etc/"}, "absolute"},
		"dot prefix":       {[]string{"--principal", "a", "--tool", "files.read", "--resource", "path:./"}, `write "path:" for the whole workspace`},
		"no scheme":        {[]string{"--principal", "a", "--tool", "files.read", "--resource", "docs/"}, "has no scheme"},
		"no namespace":     {[]string{"--principal", "a", "--tool", "read"}, "namespace"},
		"NUL principal":    {[]string{"--principal", "a\x00b", "--tool", "files.read"}, "control character"},
		"escape resource":  {[]string{"--principal", "a", "--tool", "files.read", "--resource", "x\x1b[2J"}, "control character"},
		"stray argument":   {[]string{"--principal", "a", "--tool", "files.read", "extra"}, "unknown command"},
	}
	for name, tc := range cases {
		r := runStoreCLI(t, dir, append([]string{"grant", "add"}, tc.args...)...)
		if r.code == 0 || r.out != "" || !strings.Contains(r.errOut, tc.want) {
			t.Errorf("%s: code %d, stdout %q, stderr %q; want failure mentioning %q", name, r.code, r.out, r.errOut, tc.want)
		}
	}
	if r := runStoreCLI(t, dir, "grant", "ls", "--json"); strings.TrimSpace(r.out) != "[]" {
		t.Errorf("refused grants were stored: %s", r.out)
	}
	if r := runStoreCLI(t, dir, "grant", "rm"); r.code == 0 {
		t.Error("grant rm with no id succeeded")
	}
}

func TestGrantTableEscapesHostileText(t *testing.T) {
	dir := testenv.PrivateDir(t)
	// Notes may hold newlines and tabs (refused: other control characters); a table
	// row must still stay one line, and bidi overrides must not reorder it.
	note := "line1\nline2\tcol \u202e reversed"
	if r := runStoreCLI(t, dir, "grant", "add", "--principal", "ünï", "--tool", "*", "--note", note); r.code != 0 {
		t.Fatalf("grant add: %s", r.errOut)
	}
	r := runStoreCLI(t, dir, "grant", "ls")
	if strings.ContainsAny(r.out, "\t\u202e") || strings.Count(r.out, "\n") != 2 {
		t.Errorf("table lets control characters through:\n%q", r.out)
	}
	if !strings.Contains(r.out, "ünï") {
		t.Errorf("printable unicode was escaped: %q", r.out)
	}
	r = runStoreCLI(t, dir, "grant", "ls", "--json")
	var got []map[string]any
	if err := json.Unmarshal([]byte(r.out), &got); err != nil || len(got) != 1 || got[0]["note"] != note {
		t.Errorf("JSON does not carry the note exactly: %v %v", got, err)
	}
}

func TestGrantHelp(t *testing.T) {
	r := runStoreCLI(t, testenv.PrivateDir(t), "grant", "add", "--help")
	for _, want := range []string{"--principal", "--tool", "--action", "--resource", "--deny", "explicit deny"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("grant add --help lacks %q", want)
		}
	}
}
