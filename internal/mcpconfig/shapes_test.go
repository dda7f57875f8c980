package mcpconfig_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/keystore"
	"github.com/toolgate/toolgate/internal/mcpconfig"
)

// testHasher digests like the keystore but with a fixed key, so tests can spell out
// expected digests and fingerprints.
type testHasher struct{}

func (testHasher) Digest(s keystore.Secret) string {
	sum := sha256.Sum256(append([]byte("test-digest:"), s.Reveal()...))
	return hex.EncodeToString(sum[:])
}

func digest(v string) string { return testHasher{}.Digest(keystore.NewSecretString(v)) }

func env(name string) mcpconfig.Var { return mcpconfig.Var{Name: name, Secret: "env." + name} }
func hdr(name string) mcpconfig.Var { return mcpconfig.Var{Name: name, Secret: "header." + name} }
func lit(vs ...string) []mcpconfig.Arg {
	var out []mcpconfig.Arg
	for _, v := range vs {
		out = append(out, mcpconfig.Arg{Value: v})
	}
	return out
}

// lookup is an installing process's environment.
func lookup(vars map[string]string) func(string) (string, bool) {
	return func(n string) (string, bool) { v, ok := vars[n]; return v, ok }
}

// parseOne parses doc, expects exactly one valid entry and returns it with digests
// cleared (they are checked separately against the secrets).
func parseOne(t *testing.T, doc string, opts *mcpconfig.Options) (mcpconfig.Server, map[string]string, []mcpconfig.Diagnostic) {
	t.Helper()
	r := mcpconfig.Parse([]byte(doc), testHasher{}, opts)
	if len(r.Diagnostics) > 0 || len(r.Entries) != 1 {
		t.Fatalf("Parse: %d entries, document diagnostics %v", len(r.Entries), r.Diagnostics)
	}
	e := r.Entries[0]
	if !e.OK() {
		t.Fatalf("entry %q refused: %v", e.Key, e.Diagnostics)
	}
	secrets := map[string]string{}
	for _, s := range e.Secrets {
		secrets[s.Name] = s.Value.RevealString()
	}
	srv := *e.Server
	clearDigests(t, &srv, secrets)
	return srv, secrets, e.Diagnostics
}

// clearDigests checks each digest is the digest of its secret and clears it.
func clearDigests(t *testing.T, s *mcpconfig.Server, secrets map[string]string) {
	t.Helper()
	tr := &s.Transport
	tr.Args = append([]mcpconfig.Arg(nil), tr.Args...)
	check := func(name, got string) {
		t.Helper()
		v, ok := secrets[name]
		if !ok {
			t.Errorf("the definition names secret %s, which Secrets does not hold", name)
		} else if got != digest(v) {
			t.Errorf("secret %s: digest is not the digest of its value", name)
		}
	}
	for i := range tr.Args {
		if tr.Args[i].Secret != "" {
			check(tr.Args[i].Secret, tr.Args[i].Digest)
			tr.Args[i].Digest = ""
		}
	}
	for _, vs := range []*[]mcpconfig.Var{&tr.Env, &tr.Query, &tr.Headers} {
		*vs = append([]mcpconfig.Var(nil), *vs...)
		for i := range *vs {
			check((*vs)[i].Secret, (*vs)[i].Digest)
			(*vs)[i].Digest = ""
		}
	}
}

func TestShapes(t *testing.T) {
	cases := []struct {
		name    string
		doc     string
		opts    *mcpconfig.Options
		want    mcpconfig.Server
		secrets map[string]string
		warn    []string // fragments of the warnings, in order
	}{
		{
			name: "Claude Desktop stdio",
			doc: `{"mcpServers": {"filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/alexander/Code"], "env": {}}},
				"globalShortcut": "Ctrl+Space", "preferences": {"x": 1, "x": 2}}`,
			want: mcpconfig.Server{Name: "filesystem", DisplayName: "filesystem", Isolation: mcpconfig.Shared,
				Transport: mcpconfig.Transport{Kind: mcpconfig.Stdio, Command: "npx", Args: lit("-y", "@modelcontextprotocol/server-filesystem", "/Users/alexander/Code")}},
			secrets: map[string]string{},
		},
		{
			name: "Claude Code .mcp.json with type and references",
			doc: `{"mcpServers": {
				"github": {"type": "stdio", "command": "/usr/local/bin/github-mcp-server", "args": ["stdio"],
					"env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}", "LOG": "${LOG_LEVEL:-info}"}}}}`,
			opts: &mcpconfig.Options{LookupEnv: lookup(map[string]string{"GITHUB_TOKEN": "ghp_fromenv"})},
			want: mcpconfig.Server{Name: "github", DisplayName: "github", Isolation: mcpconfig.Shared,
				Transport: mcpconfig.Transport{Kind: mcpconfig.Stdio, Command: "/usr/local/bin/github-mcp-server", Args: lit("stdio"),
					Env: []mcpconfig.Var{env("GITHUB_PERSONAL_ACCESS_TOKEN"), env("LOG")}}},
			secrets: map[string]string{"env.GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_fromenv", "env.LOG": "info"},
		},
		{
			name: "Claude Code http with headers",
			doc:  `{"mcpServers": {"remote-api": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer abc"}}}}`,
			want: mcpconfig.Server{Name: "remote-api", DisplayName: "remote-api", Isolation: mcpconfig.Shared,
				Transport: mcpconfig.Transport{Kind: mcpconfig.HTTP, URL: "https://mcp.example.com/mcp", Headers: []mcpconfig.Var{hdr("Authorization")}}},
			secrets: map[string]string{"header.Authorization": "Bearer abc"},
		},
		{
			name: "Cursor url with ${env:} header",
			doc:  `{"mcpServers": {"Linear": {"url": "https://mcp.linear.app/sse", "headers": {"authorization": "Bearer ${env:LINEAR_KEY}", "x-team": "core"}}}}`,
			opts: &mcpconfig.Options{LookupEnv: lookup(map[string]string{"LINEAR_KEY": "lin_api_0123456789"})},
			want: mcpconfig.Server{Name: "linear", DisplayName: "Linear", Isolation: mcpconfig.Shared,
				Transport: mcpconfig.Transport{Kind: mcpconfig.HTTP, URL: "https://mcp.linear.app/sse", Headers: []mcpconfig.Var{hdr("Authorization"), hdr("X-Team")}}},
			secrets: map[string]string{"header.Authorization": "Bearer lin_api_0123456789", "header.X-Team": "core"},
			warn:    []string{`installed as the server name "linear"`},
		},
		{
			name: "Windsurf serverUrl",
			doc:  `{"mcpServers": {"figma": {"serverUrl": "http://127.0.0.1:3845/mcp"}}}`,
			want: mcpconfig.Server{Name: "figma", DisplayName: "figma", Isolation: mcpconfig.Shared,
				Transport: mcpconfig.Transport{Kind: mcpconfig.HTTP, URL: "http://127.0.0.1:3845/mcp"}},
			secrets: map[string]string{},
		},
		{
			name: "Gemini CLI settings.json subset",
			doc: `{"theme": "Dracula", "mcpServers": {"docs": {"httpUrl": "https://docs.example.com/mcp", "timeout": 30000, "trust": true,
				"description": "Product docs"}}}`,
			want: mcpconfig.Server{Name: "docs", DisplayName: "docs", Description: "Product docs", Isolation: mcpconfig.Shared,
				Transport: mcpconfig.Transport{Kind: mcpconfig.HTTP, URL: "https://docs.example.com/mcp"}},
			secrets: map[string]string{},
			warn:    []string{"timeout: warning: ignored", "trust: warning: ignored"},
		},
		{
			name: "VS Code mcp.json servers with sse and inputs",
			doc:  `{"inputs": [{"id": "k", "type": "promptString"}], "servers": {"legacy": {"type": "sse", "url": "https://legacy.example.com/sse?region=eu"}}}`,
			want: mcpconfig.Server{Name: "legacy", DisplayName: "legacy", Isolation: mcpconfig.Shared,
				Transport: mcpconfig.Transport{Kind: mcpconfig.SSE, URL: "https://legacy.example.com/sse?region=eu"}},
			secrets: map[string]string{},
		},
		{
			name: "VS Code settings.json mcp.servers",
			doc:  `{"editor.fontSize": 14, "mcp": {"servers": {"mem": {"type": "stdio", "command": "node", "args": ["server.js"], "cwd": "/opt/mem"}}}}`,
			want: mcpconfig.Server{Name: "mem", DisplayName: "mem", Isolation: mcpconfig.Shared,
				Transport: mcpconfig.Transport{Kind: mcpconfig.Stdio, Command: "node", Args: lit("server.js"), Cwd: "/opt/mem"}},
			secrets: map[string]string{},
		},
		{
			name: "Cline with disabled, autoApprove and transportType",
			doc:  `{"mcpServers": {"weather": {"transportType": "streamableHttp", "url": "https://w.example.com/mcp", "disabled": true, "autoApprove": ["get_forecast"]}}}`,
			want: mcpconfig.Server{Name: "weather", DisplayName: "weather", Isolation: mcpconfig.Shared, Disabled: true,
				Transport: mcpconfig.Transport{Kind: mcpconfig.HTTP, URL: "https://w.example.com/mcp"}},
			secrets: map[string]string{},
			warn:    []string{"autoApprove: warning: ignored: a harness's approval setting"},
		},
		{
			name: "toolgate extensions, relative command against the config's directory",
			doc:  `{"mcpServers": {"browser": {"command": "./bin/browser-mcp", "isolation": "session", "required": true, "callTimeout": "90s"}}}`,
			opts: &mcpconfig.Options{BaseDir: "/home/me/project"},
			want: mcpconfig.Server{Name: "browser", DisplayName: "browser", Isolation: mcpconfig.Session, Required: true, CallTimeout: "1m30s",
				Transport: mcpconfig.Transport{Kind: mcpconfig.Stdio, Command: "/home/me/project/bin/browser-mcp"}},
			secrets: map[string]string{},
		},
		{
			name: "URL userinfo and credential query parameters become secrets",
			doc:  `{"mcpServers": {"db": {"url": "https://admin:s3cr%40t@db.example.com/mcp?format=json&api_key=K1&sig=S2"}}}`,
			want: mcpconfig.Server{Name: "db", DisplayName: "db", Isolation: mcpconfig.Shared,
				Transport: mcpconfig.Transport{Kind: mcpconfig.HTTP, URL: "https://db.example.com/mcp?format=json",
					Query:   []mcpconfig.Var{{Name: "api_key", Secret: "query.api_key"}, {Name: "sig", Secret: "query.sig"}},
					Headers: []mcpconfig.Var{hdr("Authorization")}}},
			secrets: map[string]string{"header.Authorization": "Basic YWRtaW46czNjckB0", "query.api_key": "K1", "query.sig": "S2"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, secrets, diags := parseOne(t, c.doc, c.opts)
			if !reflect.DeepEqual(got, c.want) {
				gj, _ := json.MarshalIndent(got, "", " ")
				wj, _ := json.MarshalIndent(c.want, "", " ")
				t.Errorf("server:\n%s\nwant:\n%s", gj, wj)
			}
			if !reflect.DeepEqual(secrets, c.secrets) {
				t.Errorf("secrets %q, want %q", secrets, c.secrets)
			}
			var warnings []string
			for _, d := range diags {
				if d.Severity != mcpconfig.Warning {
					t.Errorf("an accepted entry has an error: %v", d)
				}
				warnings = append(warnings, d.String())
			}
			for _, w := range c.warn {
				if !strings.Contains(strings.Join(warnings, "\n"), w) {
					t.Errorf("no warning says %q; warnings: %q", w, warnings)
				}
			}
		})
	}
}

func TestRelativeCommandAgainstCwd(t *testing.T) {
	got, _, _ := parseOne(t, `{"mcpServers": {"srv": {"command": "node_modules/.bin/srv", "cwd": "tools/../srv"}}}`,
		&mcpconfig.Options{BaseDir: "/p"})
	if got.Transport.Cwd != "/p/srv" || got.Transport.Command != "/p/srv/node_modules/.bin/srv" {
		t.Errorf("cwd %q command %q; want /p/srv and /p/srv/node_modules/.bin/srv", got.Transport.Cwd, got.Transport.Command)
	}
}

// TestContainerOrder: entries come back in document order, not map order.
func TestContainerOrder(t *testing.T) {
	r := mcpconfig.Parse([]byte(`{"mcpServers": {"zeta": {"command": "z"}, "alpha": {"command": "a"}, "mid": {"command": "m"}}}`), testHasher{}, nil)
	var keys []string
	for _, e := range r.Entries {
		keys = append(keys, e.Key)
	}
	if strings.Join(keys, ",") != "zeta,alpha,mid" || r.Status() != mcpconfig.StatusOK || r.Container != "mcpServers" {
		t.Errorf("entries %q, status %s, container %q", keys, r.Status(), r.Container)
	}
}
