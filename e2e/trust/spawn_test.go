package trust

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

const procTool = `{"name":"proc","description":"returns its argv and environment","inputSchema":{"type":"object"}}`

// An install whose command and args are full of shell metacharacters runs them as
// literal argv (no shell: nothing they spell runs); the upstream's /proc/self/environ
// holds only its declared env and the minimal base, never toolgate's own (a secret
// set in serve's environment); and no MCP tool, control-plane tools included, changes
// an install, a grant or a pin.
func TestSpawnHygieneAndNoToolChangesTrust(t *testing.T) {
	r := newRig(t)
	dir := t.TempDir()
	pwned := filepath.Join(dir, "pwned")
	// The program itself lives at a path a shell would split and run.
	odd := filepath.Join(dir, "bin; touch "+pwned+"0 $(touch "+pwned+"1)")
	self, _ := os.ReadFile(upstreamtest.Fixture(t))
	prog := filepath.Join(odd, "fx `touch "+pwned+"2` | cat")
	os.MkdirAll(filepath.Dir(prog), 0o755)
	if err := os.WriteFile(prog, self, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"-tool", procTool, "-marker", "m; touch " + pwned + "3", "$(touch " + pwned + "4)", "`touch " + pwned + "5`",
		"&& touch " + pwned + "6", "| tee " + pwned + "7", "> " + pwned + "8", "*", "~", "$HOME", "'\"", "\\"}
	env := map[string]string{"DECLARED": "$(touch " + pwned + "9)", "LD_PRELOAD_NOT": "x; y"}
	t.Setenv("TOOLGATE_E2E_SECRET", "serve-only-secret")
	if out, code := r.install(map[string]server{"fx": {Command: prog, Args: args, Env: env}, "other": fixture(t)}); code != 0 {
		t.Fatalf("install: %s", out)
	}
	r.grant("--principal", "default", "--tool", "*")
	r.serve()
	r.waitTools("default", "fx.proc", "other.echo")
	s := r.client("default", nil)
	txt, isErr := call(t, s, "fx.proc", nil)
	var p struct {
		Argv, Environ []string
	}
	if isErr || json.Unmarshal([]byte(txt), &p) != nil {
		t.Fatalf("proc: %s", txt)
	}
	if want := append([]string{prog}, args...); !slices.Equal(p.Argv, want) {
		t.Errorf("argv:\n got %q\nwant %q", p.Argv, want)
	}
	matches, _ := filepath.Glob(pwned + "*")
	if len(matches) != 0 {
		t.Errorf("a metacharacter ran: %v", matches)
	}
	allowed := map[string]bool{}
	for _, n := range upstream.BaseEnvNames {
		allowed[n] = true
	}
	for k := range env {
		allowed[k] = true
	}
	seen := map[string]string{}
	for _, kv := range p.Environ {
		k, v, _ := strings.Cut(kv, "=")
		seen[k] = v
		if !allowed[k] {
			t.Errorf("the upstream's environment holds %s, neither declared nor base", k)
		}
	}
	if seen["DECLARED"] != env["DECLARED"] || seen["LD_PRELOAD_NOT"] != env["LD_PRELOAD_NOT"] {
		t.Errorf("declared env not passed as written: %v", seen)
	}

	// No tool of the catalogue changes an install, a grant or a pin.
	state := func() string {
		var ls struct {
			Servers []struct {
				Name, Fingerprint string
				Policy            json.RawMessage
			}
		}
		json.Unmarshal([]byte(r.tg("ls", "--json")), &ls)
		installs, _ := json.Marshal(ls.Servers) // without the times and runtime, which move
		return r.tg("grant", "ls") + string(installs) + r.tg("pins", "ls", "fx") + r.tg("pins", "ls", "other") + r.tg("pins", "policy", "fx")
	}
	before := state()
	list, err := s.ListTools(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	hostile := map[string]any{"name": "fx", "server": "fx", "id": "mcp_000000000000000001", "enabled": false, "tool": "echo",
		"digest": "sha256:" + strings.Repeat("0", 64), "principal": "default", "action": "*", "trusted": true, "pin": "tofu",
		"command": "/bin/sh", "args": []string{"-c", "touch " + pwned + "x"}, "op": "restore", "reason": "please approve"}
	for _, tl := range list.Tools {
		n := tl.Name
		if strings.HasPrefix(n, "fx.") || strings.HasPrefix(n, "other.") {
			continue // the upstreams' own tools reach only their servers
		}
		for _, verb := range []string{"install", "uninstall", "grant", "pin", "approve", "trust", "policy"} {
			if strings.Contains(n, verb) {
				t.Errorf("a catalogue tool is named like a trust decision: %s", n)
			}
		}
		// Once with everything, once with what its schema takes (each property given
		// the hostile value of that name, or a server's name).
		txt, _ := call(t, s, n, hostile)
		t.Logf("%s: %.160s", n, txt)
		var sch struct {
			Properties map[string]struct{ Type any }
		}
		b, _ := json.Marshal(tl.InputSchema)
		json.Unmarshal(b, &sch)
		fit := map[string]any{}
		for k, ps := range sch.Properties {
			if v, ok := hostile[k]; ok && fmt.Sprint(ps.Type) != "string" == (fmt.Sprintf("%T", v) != "string") {
				fit[k] = v
			} else if fmt.Sprint(ps.Type) == "string" {
				fit[k] = "fx"
			}
		}
		txt, _ = call(t, s, n, fit)
		t.Logf("%s %v: %.160s", n, fit, txt)
	}
	if after := state(); after != before {
		t.Errorf("a tool call changed installs, grants or pins:\nbefore %s\nafter %s", before, after)
	}
	if txt, isErr := call(t, s, "other.echo", map[string]any{"text": "ok"}); isErr || txt != "ok" {
		t.Fatalf("other: %s", txt)
	}
}
