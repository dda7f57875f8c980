package mcpconfig_test

import (
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/keystore"
	"github.com/toolgate/toolgate/internal/mcpconfig"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/rpcwire"
)

var fuzzSeeds = []string{
	`{"mcpServers": {"filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"], "env": {}}}}`,
	`{"mcpServers": {"gh": {"command": "docker", "args": ["run", "-e", "GITHUB_TOKEN=x", "--token", "y", "postgresql://u:p@h/db"], "env": {"GITHUB_TOKEN": "${env:T}", "B": "${T:-d}"}, "cwd": "/w"}}}`,
	`{"mcpServers": {"r": {"url": "https://u:p@h.example.com/mcp?a=1&api_key=k", "headers": {"Authorization": "Bearer x", "X-A": "${T}"}}}}`,
	`{"servers": {"v": {"type": "sse", "url": "http://127.0.0.1:9/sse"}, "w": {"type": "stdio", "command": "./x", "cwd": "rel"}}, "inputs": []}`,
	`{"mcp": {"servers": {"m": {"transportType": "streamableHttp", "serverUrl": "https://x.example.com", "disabled": true, "autoApprove": []}}}}`,
	`{"mcpServers": {"a": {"command": "x"}, "A": {"command": "y"}, "a b": {"httpUrl": "https://q.example.com/#f"}, "local": {"command": "z"}}}`,
	`{"mcpServers": {"x": {"command": "x", "args": ["${input:k}", "${workspaceFolder}", "${", "${}", "$${A}"], "env": {"A=B": 1, "TOOLGATE_X": "${TOOLGATE_Y}"}}}}`,
	`{"mcpServers": {"x": {"url": "http://[::1]:80/p?%zz", "headers": {"Host": "h", "X": "a\r\nb"}, "isolation": "session", "required": "no", "pin": {}}}}`,
	"\xef\xbb\xbf{\"mcpServers\":{\"s\":{\"command\":\"/bin/\\u202esh\",\"args\":[\"\\u0000\"]}}}",
	`{"mcpServers": {"s": {"command": "x", "args": ["a"], "args": ["b"]}}}`,
	`{"mcpServers": null}`, `[]`, `{}`, ``, `{"mcpServers": {"s": {"command": "x"}}} //`,
}

// FuzzParse: no input panics; Parse is deterministic; every accepted definition
// validates, survives a JSON round trip, has a valid namespace and names exactly the
// secrets it hands over, each under a ref the keystore accepts; and a canary put in
// every secret position of the input shows nowhere but in those secrets.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	opts := &mcpconfig.Options{LookupEnv: func(string) (string, bool) { return canary, true }, BaseDir: "/base"}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := mcpconfig.Parse(data, testHasher{}, opts)
		again := mcpconfig.Parse(data, testHasher{}, opts)
		if !sameResult(r, again) {
			t.Fatal("two parses of one input differ")
		}
		for _, e := range r.Entries {
			if len(e.Diagnostics) > mcpconfig.MaxDiagnostics+1 {
				t.Fatalf("%d diagnostics on one entry", len(e.Diagnostics))
			}
			if !e.OK() {
				if e.Secrets != nil {
					t.Fatal("a refused entry hands over secrets")
				}
				continue
			}
			checkAccepted(t, e)
		}
		if injected, ok := injectCanary(data); ok {
			ir := mcpconfig.Parse(injected, testHasher{}, opts)
			for _, l := range leaks(t, ir) {
				t.Fatalf("canary leaked: %s\ninput: %s", l, injected)
			}
		}
	})
}

func sameResult(a, b *mcpconfig.Result) bool {
	if a.Container != b.Container || !reflect.DeepEqual(a.Diagnostics, b.Diagnostics) || len(a.Entries) != len(b.Entries) {
		return false
	}
	for i := range a.Entries {
		x, y := a.Entries[i], b.Entries[i]
		if x.Key != y.Key || !reflect.DeepEqual(x.Server, y.Server) || !reflect.DeepEqual(x.Diagnostics, y.Diagnostics) || len(x.Secrets) != len(y.Secrets) {
			return false
		}
		for j := range x.Secrets {
			if x.Secrets[j].Name != y.Secrets[j].Name || !x.Secrets[j].Value.Equal(y.Secrets[j].Value) {
				return false
			}
		}
	}
	return true
}

func checkAccepted(t *testing.T, e mcpconfig.Entry) {
	s := e.Server
	roundTrip(t, s)
	if !policy.ValidNamespace(s.Name) || !policy.ValidToolID(s.Name+".tool") {
		t.Fatalf("server name %q is not a namespace", s.Name)
	}
	named := map[string]bool{}
	tr := &s.Transport
	for _, a := range tr.Args {
		if a.Secret != "" {
			named[a.Secret] = true
		}
	}
	for _, vs := range [][]mcpconfig.Var{tr.Env, tr.Query, tr.Headers} {
		for _, v := range vs {
			named[v.Secret] = true
		}
	}
	if len(named) != len(e.Secrets) {
		t.Fatalf("the definition names %d secrets, the entry hands over %d", len(named), len(e.Secrets))
	}
	for i, sec := range e.Secrets {
		if !named[sec.Name] || (i > 0 && e.Secrets[i-1].Name >= sec.Name) {
			t.Fatalf("secret %q is not named by the definition, or not in order", sec.Name)
		}
		ref := keystore.Ref{Scope: "workspace:ws_000000000000000001", Server: s.Name, Name: sec.Name}
		if err := ref.Validate(); err != nil {
			t.Fatalf("the keystore would refuse secret %q: %v", sec.Name, err)
		}
		if sec.Value.Len() > keystore.MaxSecretBytes {
			t.Fatalf("secret %q is %d bytes, over the keystore's limit", sec.Name, sec.Value.Len())
		}
	}
}

// injectCanary rewrites a strictly decodable document: every occurrence of the canary
// is removed, then every env and header value of every entry becomes the canary, URLs
// get canary userinfo and a token parameter, and credential arguments are appended.
func injectCanary(data []byte) ([]byte, bool) {
	v, err := rpcwire.DecodeValue(data)
	if err != nil {
		return nil, false
	}
	v = scrub(v)
	top, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	var containers []any
	containers = append(containers, top["mcpServers"], top["servers"])
	if m, ok := top["mcp"].(map[string]any); ok {
		containers = append(containers, m["servers"])
	}
	for _, c := range containers {
		entries, ok := c.(map[string]any)
		if !ok {
			continue
		}
		for _, ev := range entries {
			e, ok := ev.(map[string]any)
			if !ok {
				continue
			}
			for _, k := range []string{"env", "headers"} {
				if m, ok := e[k].(map[string]any); ok {
					for name := range m {
						m[name] = canary
					}
				}
			}
			for _, k := range []string{"url", "serverUrl", "httpUrl"} {
				if s, ok := e[k].(string); ok {
					if u, err := url.Parse(s); err == nil && u.Host != "" {
						u.User = url.UserPassword("user", canary)
						if u.RawQuery != "" {
							u.RawQuery += "&"
						}
						u.RawQuery += "token=" + canary
						e[k] = u.String()
					}
				}
			}
			if args, ok := e["args"].([]any); ok {
				e["args"] = append(args, "--token="+canary, "--api-key", canary, "ghp_"+canary)
			}
		}
	}
	out, err := json.Marshal(top)
	return out, err == nil
}

// scrub removes the canary from every string and member name.
func scrub(v any) any {
	switch t := v.(type) {
	case string:
		return strings.ReplaceAll(t, canary, "x")
	case []any:
		for i := range t {
			t[i] = scrub(t[i])
		}
		return t
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[strings.ReplaceAll(k, canary, "x")] = scrub(x)
		}
		return out
	}
	return v
}
