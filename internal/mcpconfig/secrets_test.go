package mcpconfig_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/keystore"
	"github.com/toolgate/toolgate/internal/keystore/keystoretest"
	"github.com/toolgate/toolgate/internal/mcpconfig"
)

const canary = "CANARY7f3e9a1b"

func TestArgSecrets(t *testing.T) {
	cases := []struct {
		args []string
		want []string // the redacted args; "" where the arg stays literal
	}{
		{[]string{"--token=abc123"}, []string{"--token=[redacted]"}},
		{[]string{"--api-key", "abc123", "--port", "8080"}, []string{"", "[redacted]", "", ""}},
		{[]string{"run", "-i", "--rm", "-e", "GITHUB_TOKEN=ghp_x", "-e", "GITHUB_HOST", "ghcr.io/github/github-mcp-server"}, []string{"", "", "", "", "GITHUB_TOKEN=[redacted]", "", "", ""}},
		{[]string{"postgresql://app:pw@localhost/db"}, []string{"postgresql://[redacted]@localhost/db"}},
		{[]string{"https://x.example.com/mcp?access_token=abc&region=eu"}, []string{"https://x.example.com/mcp?access_token=[redacted]&region=eu"}},
		{[]string{"ghp_0123456789abcdefABCD"}, []string{"[redacted]"}},
		{[]string{"sk-ant-api03-0123456789"}, []string{"[redacted]"}},
		{[]string{"xoxb-12345678-abcdefgh"}, []string{"[redacted]"}},
		{[]string{"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln"}, []string{"[redacted]"}},
		{[]string{"Bearer abc"}, []string{"[redacted]"}},
		{[]string{"--password", "-v"}, []string{"", ""}}, // a flag after a flag is not its value
		{[]string{"mcp-remote", "https://x.example.com/mcp", "--header", "Authorization: Bearer abcdefgh123"}, []string{"", "", "", "Authorization: [redacted]"}},
		{[]string{"--header=X-Api-Key:abc", "-H", "Cookie: sid=1"}, []string{"--header=X-Api-Key:[redacted]", "", "Cookie: [redacted]"}},
		{[]string{"--config", "{\"auth\": \"x\", \"k\": \"ghp_0123456789abcdef\"}"}, []string{"", "[redacted]"}},
		{[]string{"--note=use Bearer abcdefgh12345 here"}, []string{"[redacted]"}},
		// Literal: package names, paths, ports, plain URLs, short look-alikes.
		{[]string{"-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Code", "--port=8080", "https://example.com/docs", "skill", "sk-", "ghp_short", "--verbose",
			"key", "a basic mode", "--mode=token", "http://localhost:8080/mcp", "--root=/srv/auth-free"},
			[]string{"", "", "", "", "", "", "", "", "", "", "", "", "", ""}},
		// References: secret, shown as written, with defaults hidden.
		{[]string{"--token", "${env:T}", "${env:T}", "--x=${T:-fallback}", "${T}/path"}, []string{"", "[redacted]", "${env:T}", "--x=${T:-[redacted]}", "${T}/path"}},
	}
	for _, c := range cases {
		args, _ := json.Marshal(c.args)
		doc := `{"mcpServers": {"srv": {"command": "x", "args": ` + string(args) + `}}}`
		srv, secrets, diags := parseOne(t, doc, &mcpconfig.Options{LookupEnv: lookup(map[string]string{"T": "from-env"})})
		var got []string
		for _, a := range srv.Transport.Args {
			got = append(got, a.Redacted)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("args %q: redacted %q, want %q", c.args, got, c.want)
			continue
		}
		warned := 0
		for i, a := range srv.Transport.Args {
			if c.want[i] == "" {
				if a.Secret != "" || a.Value != c.args[i] {
					t.Errorf("args %q: literal [%d] is %+v", c.args, i, a)
				}
				continue
			}
			warned++
			name := fmt.Sprintf("arg.%d", i)
			if a.Secret != name || a.Value != "" || secrets[name] == "" {
				t.Errorf("args %q: [%d] is %+v with secret %q", c.args, i, a, secrets[name])
			}
			if !strings.Contains(c.args[i], "${") && secrets[name] != c.args[i] {
				t.Errorf("args %q: secret [%d] holds %q", c.args, i, secrets[name])
			}
		}
		if len(diags) != warned {
			t.Errorf("args %q: %d warnings for %d secret arguments: %v", c.args, len(diags), warned, diags)
		}
	}
}

// leaks reports where canary shows in a parse result: diagnostics, definitions (as
// stored), the redacted transport, the fingerprint, and the whole result printed and
// logged.
func leaks(t *testing.T, r *mcpconfig.Result) []string {
	t.Helper()
	var found []string
	check := func(where, s string) {
		if strings.Contains(s, canary) {
			found = append(found, where+": "+s)
		}
	}
	for _, d := range r.Diagnostics {
		check("document diagnostic", d.String())
	}
	var logBuf bytes.Buffer
	lg := slog.New(slog.NewJSONHandler(&logBuf, nil))
	for _, e := range r.Entries {
		for _, d := range e.Diagnostics {
			check("diagnostic", d.String())
		}
		check("entry printed", fmt.Sprintf("%+v %#v", e, e))
		lg.Info("entry", "entry", e, "secrets", e.Secrets)
		if e.Server == nil {
			continue
		}
		def, _ := json.Marshal(e.Server)
		check("definition", string(def))
		red, _ := json.Marshal(e.Server.Redacted("user"))
		check("redacted", string(red))
		check("display url", e.Server.Transport.DisplayURL())
		check("fingerprint", e.Server.Fingerprint())
	}
	check("log", logBuf.String())
	return found
}

// TestCanaryNowhere puts a canary in every secret position of valid and invalid
// entries and checks it reaches the keystore's input (Secrets) and nothing else.
func TestCanaryNowhere(t *testing.T) {
	ks, _ := keystoretest.New(t)
	env := map[string]string{"TOKEN": canary + "-env"}
	opts := &mcpconfig.Options{LookupEnv: lookup(env)}
	valid := fmt.Sprintf(`{"mcpServers": {
		"stdio": {"command": "npx", "args": ["-y", "pkg", "--token=%[1]s", "--api-key", "%[1]s", "postgresql://u:%[1]s@localhost/db",
			"https://x.example.com/?key=%[1]s", "ghp_%[1]s", "Bearer %[1]s", "${env:TOKEN}", "${UNSET:-%[1]s}"],
			"env": {"A": "%[1]s", "B": "${TOKEN}", "C": "prefix ${env:TOKEN} suffix"}},
		"http": {"url": "https://user:%[1]s@mcp.example.com/mcp?api_key=%[1]s&x=1&sig=%[1]s", "headers": {"X-Api-Key": "%[1]s", "X-Other": "${env:TOKEN}"}},
		"bearer": {"url": "https://b.example.com/mcp?v=ghp_%[1]s", "headers": {"Authorization": "Bearer %[1]s"}}
	}}`, canary)
	r := mcpconfig.Parse([]byte(valid), ks, opts)
	if r.Status() != mcpconfig.StatusOK {
		t.Fatalf("status %s: %v %v", r.Status(), r.Diagnostics, r.Entries)
	}
	for _, l := range leaks(t, r) {
		t.Errorf("leak: %s", l)
	}
	// Positive control: every secret value is in Secrets, where the installer takes it.
	n := 0
	for _, e := range r.Entries {
		for _, s := range e.Secrets {
			if strings.Contains(s.Value.RevealString(), canary) {
				n++
			}
		}
	}
	// 8 arguments and 3 env values; 2 query parameters and 2 headers (the userinfo is
	// in the Basic header, base64-encoded); 1 query parameter and 1 header.
	if n != 8+3+4+2 {
		t.Errorf("%d secrets carry the canary, want 17", n)
	}
	invalid := []string{
		`{"url": "ftp://user:%[1]s@host.example.com/"}`,
		`{"url": "%[1]s"}`,
		`{"url": "ghp_%[1]s:x"}`,
		`{"url": "https://host.example.com/?token=%[1]s#frag"}`,
		`{"url": "https://h.example.com/?token=%[1]s&token=%[1]s"}`,
		`{"url": "https://u:%[1]s@h.example.com/", "headers": {"Authorization": "%[1]s"}}`,
		`{"url": "http://remote.example.com/?token=%[1]s"}`,
		`{"url": "https://h.example.com/%%zz?token=%[1]s"}`,
		`{"url": "https://h.example.com/?t=%%zz%[1]s"}`,
		`{"url": "https://h.example.com/", "headers": {"X-K": "%[1]s\r\nX-Evil: 1"}}`,
		`{"url": "https://h.example.com/", "headers": {"X-K": "%[1]s", "Bad Name": "x"}}`,
		`{"url": "https://h.example.com/", "headers": {"X-K": "%[1]s", "Host": "x"}}`,
		`{"command": "npx --token=%[1]s"}`,
		`{"command": "/bin/%[1]s\u0007"}`,
		`{"command": "x", "args": ["--token=%[1]s\u0007"]}`,
		`{"command": "x", "args": ["%[1]s` + strings.Repeat("x", mcpconfig.MaxArgBytes) + `"]}`,
		`{"command": "x", "args": ["--token=%[1]s"], "env": {"A": 5}}`,
		`{"command": "x", "env": {"A": "%[1]s\u0000"}}`,
		`{"command": "x", "env": {"A": "%[1]s", "B": "${input:%[1]s}"}}`,
		`{"command": "x", "env": {"A": "${env:%[1]s-x}"}}`,
		`{"command": "x", "env": {"A": "${%[1]s:x}"}}`,
		`{"command": "x", "env": {"A": "${TOOLGATE_X:-%[1]s}"}}`,
		`{"command": "x", "args": ["${MISSING}", "--token=%[1]s"]}`,
		`{"command": "x", "cwd": "/tmp/${TOKEN}", "args": ["%[1]s"]}`,
		`{"command": "x", "args": ["--token=%[1]s"], "env": {"E": "%[1]s"}, "unknown": true}`,
	}
	for _, entry := range invalid {
		doc := fmt.Sprintf(`{"mcpServers": {"bad": `+entry+`}}`, canary)
		r := mcpconfig.Parse([]byte(doc), ks, opts)
		if len(r.Entries) != 1 || r.Entries[0].OK() {
			t.Errorf("%s: accepted (%v)", entry, r.Diagnostics)
			continue
		}
		for _, l := range leaks(t, r) {
			t.Errorf("%s: leak: %s", entry, l)
		}
	}
}

// TestResolve stores a parsed entry's secrets in a keystore and puts them back the way
// the host does when it starts the process or connects.
func TestResolve(t *testing.T) {
	ctx := context.Background()
	ks, _ := keystoretest.New(t)
	doc := `{"mcpServers": {
		"stdio": {"command": "npx", "args": ["-y", "pkg", "--token=t0k", "plain"], "env": {"B": "2", "A": "1"}},
		"http": {"url": "https://user:pw@mcp.example.com/mcp?x=1&api_key=a%26b", "headers": {"X-Key": "k"}}
	}}`
	r := mcpconfig.Parse([]byte(doc), ks, nil)
	if r.Status() != mcpconfig.StatusOK {
		t.Fatal(r.Entries)
	}
	for _, e := range r.Entries {
		if err := ks.ReplaceServer(ctx, "user", e.Server.Name, e.Secrets); err != nil {
			t.Fatal(err)
		}
	}
	st := r.Entries[0].Server.Transport
	argv, err := st.Argv(ctx, ks.Server("user", "stdio"))
	if err != nil || !slices.Equal(argv, []string{"npx", "-y", "pkg", "--token=t0k", "plain"}) {
		t.Errorf("Argv = %q, %v", argv, err)
	}
	environ, err := st.Environ(ctx, ks.Server("user", "stdio"))
	if err != nil || !slices.Equal(environ, []string{"A=1", "B=2"}) {
		t.Errorf("Environ = %q, %v", environ, err)
	}
	ht := r.Entries[1].Server.Transport
	ep, err := ht.Endpoint(ctx, ks.Server("user", "http"))
	if err != nil || ep.RevealString() != "https://mcp.example.com/mcp?x=1&api_key=a%26b" {
		t.Errorf("Endpoint = %q, %v", ep.RevealString(), err)
	}
	if fmt.Sprint(ep) != keystore.Redacted || ht.DisplayURL() != "https://mcp.example.com/mcp?x=1&api_key=[redacted]" {
		t.Errorf("Endpoint prints %v, DisplayURL %q", ep, ht.DisplayURL())
	}
	hs, err := ht.HeaderValues(ctx, ks.Server("user", "http"))
	if err != nil || len(hs) != 2 || hs[0].Name != "Authorization" || hs[0].Value.RevealString() != "Basic dXNlcjpwdw==" ||
		hs[1].Name != "X-Key" || hs[1].Value.RevealString() != "k" {
		t.Errorf("HeaderValues = %+v, %v", hs, err)
	}
	// A secret missing from the keystore: the error names it, never a value.
	if err := ks.Delete(ctx, keystore.Ref{Scope: "user", Server: "stdio", Name: "env.B"}); err != nil {
		t.Fatal(err)
	}
	_, err = st.Environ(ctx, ks.Server("user", "stdio"))
	if !errors.Is(err, keystore.ErrNotFound) || !strings.Contains(err.Error(), "env B") {
		t.Errorf("Environ with a missing secret = %v", err)
	}
	// Secrets of one scope are not another's.
	if _, err := st.Argv(ctx, ks.Server("workspace:ws_1", "stdio")); !errors.Is(err, keystore.ErrNotFound) {
		t.Errorf("Argv under another scope = %v, want ErrNotFound", err)
	}
}
