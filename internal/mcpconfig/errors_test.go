package mcpconfig_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/mcpconfig"
)

// TestDocumentErrors: a document that cannot be read as a whole gets one document-level
// error and no entries.
func TestDocumentErrors(t *testing.T) {
	many := `{"mcpServers": {` + strings.Repeat(`"s%d": {"command": "x"},`, mcpconfig.MaxServers) + `"last": {"command": "x"}}}`
	many = fmt.Sprintf(many, func() []any {
		var a []any
		for i := range mcpconfig.MaxServers {
			a = append(a, i)
		}
		return a
	}()...)
	cases := []struct{ name, doc, want string }{
		{"empty", ``, "not JSON"},
		{"syntax error", "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  }\n}", "line 3, column"},
		{"comments", "{\n  // my servers\n  \"mcpServers\": {}\n}", "comments are not JSON"},
		{"truncated", `{"mcpServers": {"a": {"command": "x"}`, "not JSON"},
		{"trailing data", `{"mcpServers": {"a": {"command": "x"}}} {}`, "data after the end"},
		{"not UTF-8", "{\"mcpServers\": {\"a\": {\"command\": \"\xff\"}}}", "not valid UTF-8"},
		{"too large", `{"x": "` + strings.Repeat("a", mcpconfig.MaxConfigBytes) + `"}`, "at most 1048576"},
		{"an array", `[{"mcpServers": {}}]`, "must be a JSON object"},
		{"no container", `{"servers_": {}, "mcp": {"other": 1}}`, "no servers: the config needs an object named mcpServers"},
		{"two containers", `{"mcpServers": {"a": {"command": "x"}}, "servers": {"b": {"command": "y"}}}`, "both mcpServers and servers"},
		{"mcpServers and mcp.servers", `{"mcpServers": {"a": {"command": "x"}}, "mcp": {"servers": {}}}`, "both mcpServers and mcp.servers"},
		{"container null", `{"mcpServers": null}`, "not null"},
		{"container array", `{"mcpServers": [{"command": "x"}]}`, "must be an object of servers by name"},
		{"no servers", `{"mcpServers": {}}`, "holds no servers"},
		{"too many servers", many, fmt.Sprintf("holds %d servers, at most %d", mcpconfig.MaxServers+1, mcpconfig.MaxServers)},
		{"duplicate server", `{"mcpServers": {"a": {"command": "x"}, "a": {"command": "evil"}}}`, `duplicate member "a"`},
		{"case-variant servers", `{"mcpServers": {"GitHub": {"command": "x"}, "github": {"command": "y"}}}`, `differ only in case`},
		{"duplicate container", `{"mcpServers": {"a": {"command": "x"}}, "mcpServers": {"a": {"command": "evil"}}}`, `duplicate member "mcpServers"`},
		{"case-variant container", `{"mcpServers": {"a": {"command": "x"}}, "mcpservers": {"a": {"command": "evil"}}}`, `differ only in case`},
		{"long-s folding", `{"mcpServers": {"sx": {"command": "x"}, "ſx": {"command": "y"}}}`, `differ only in case`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := mcpconfig.Parse([]byte(c.doc), testHasher{}, nil)
			if len(r.Entries) != 0 || r.Status() != mcpconfig.StatusValidationError || len(r.Diagnostics) != 1 {
				t.Fatalf("entries %d, status %s, diagnostics %v; want one document error", len(r.Entries), r.Status(), r.Diagnostics)
			}
			if d := r.Diagnostics[0]; d.Severity != mcpconfig.Error || !strings.Contains(d.Message, c.want) {
				t.Errorf("diagnostic %v, want an error saying %q", d, c.want)
			}
		})
	}
	// A BOM is not an error.
	if r := mcpconfig.Parse([]byte("\xef\xbb\xbf{\"mcpServers\": {\"a\": {\"command\": \"x\"}}}"), testHasher{}, nil); r.Status() != mcpconfig.StatusOK {
		t.Errorf("a config with a byte order mark: %v", r.Diagnostics)
	}
}

// TestPartial: one bad entry, including one with smuggled duplicate members, fails
// alone; the others are installed.
func TestPartial(t *testing.T) {
	doc := `{"mcpServers": {
		"good": {"command": "npx", "args": ["-y", "x"]},
		"smuggled": {"command": "npx", "args": ["safe"], "args": ["evil"]},
		"folded": {"command": "npx", "env": {"TOKEN": "a"}, "ENV": {"TOKEN": "b"}},
		"alsogood": {"url": "https://a.example.com/mcp"}
	}}`
	r := mcpconfig.Parse([]byte(doc), testHasher{}, nil)
	if r.Status() != mcpconfig.StatusPartial || len(r.Entries) != 4 {
		t.Fatalf("status %s with %d entries, want partial with 4", r.Status(), len(r.Entries))
	}
	want := map[string]string{"smuggled": `duplicate member "args"`, "folded": `members "env" and "ENV" differ only in case`}
	for _, e := range r.Entries {
		w, bad := want[e.Key]
		if e.OK() == bad {
			t.Errorf("%s: ok %v: %v", e.Key, e.OK(), e.Diagnostics)
		}
		if bad && (len(e.Diagnostics) != 1 || !strings.Contains(e.Diagnostics[0].String(), "mcpServers."+e.Key+": "+w)) {
			t.Errorf("%s: diagnostics %v, want %q", e.Key, e.Diagnostics, w)
		}
	}
	allBad := mcpconfig.Parse([]byte(`{"mcpServers": {"a": {}, "b": {"command": ""}}}`), testHasher{}, nil)
	if allBad.Status() != mcpconfig.StatusValidationError {
		t.Errorf("every entry bad: status %s", allBad.Status())
	}
}

// TestEntryErrors: each problem is reported on the entry, naming the server and the
// field as the config spells them.
func TestEntryErrors(t *testing.T) {
	long := strings.Repeat("a", mcpconfig.MaxArgBytes+1)
	manyArgs := `[` + strings.TrimSuffix(strings.Repeat(`"a",`, mcpconfig.MaxArgs+1), ",") + `]`
	var manyEnv, manyHeaders []string
	for i := range mcpconfig.MaxEnv + 1 {
		manyEnv = append(manyEnv, fmt.Sprintf(`"V%d": "x"`, i))
	}
	for i := range mcpconfig.MaxHeaders + 1 {
		manyHeaders = append(manyHeaders, fmt.Sprintf(`"X-H%d": "x"`, i))
	}
	noEnv := &mcpconfig.Options{}
	withEnv := &mcpconfig.Options{LookupEnv: lookup(map[string]string{"SET": "v", "TOOLGATE_TOKEN": "own", "BIG": long})}
	cases := []struct {
		name  string
		entry string // the JSON of server "srv" (or the whole container member when it starts with a quote)
		opts  *mcpconfig.Options
		path  string
		want  string
	}{
		{"not an object", `"npx"`, nil, "mcpServers.srv", "must be an object"},
		{"nothing to run", `{}`, nil, "mcpServers.srv", "needs command (to run a stdio server) or url"},
		{"stdio without command", `{"type": "stdio", "args": ["x"]}`, nil, "mcpServers.srv.command", "required for a stdio server"},
		{"http without url", `{"type": "http"}`, nil, "mcpServers.srv.url", "required for an HTTP server"},
		{"command and url", `{"command": "x", "url": "https://a.example.com"}`, nil, "mcpServers.srv", "has both command"},
		{"two urls", `{"url": "https://a.example.com", "serverUrl": "https://b.example.com"}`, nil, "mcpServers.srv.serverUrl", "gives the URL a second time"},
		{"type and transportType", `{"type": "stdio", "transportType": "stdio", "command": "x"}`, nil, "mcpServers.srv.transportType", "gives the transport a second time"},
		{"unknown type", `{"type": "websocket", "url": "wss://a.example.com"}`, nil, "mcpServers.srv.type", `must be "stdio", "http"`},
		{"type not a string", `{"type": 1, "command": "x"}`, nil, "mcpServers.srv.type", "must be a string (write it in quotes)"},
		{"httpUrl with sse", `{"type": "sse", "httpUrl": "https://a.example.com"}`, nil, "mcpServers.srv.httpUrl", "Streamable HTTP URL"},
		{"url on stdio", `{"type": "stdio", "command": "x", "headers": {"A": "b"}}`, nil, "mcpServers.srv.headers", "only for HTTP servers"},
		{"env on http", `{"url": "https://a.example.com", "env": {"A": "b"}}`, nil, "mcpServers.srv.env", "only for stdio servers"},
		{"empty command", `{"command": ""}`, nil, "mcpServers.srv.command", "must not be empty"},
		{"command with args", `{"command": "npx -y @modelcontextprotocol/server-memory"}`, nil, "mcpServers.srv.command", "without a shell, so put its arguments in args"},
		{"command control char", `{"command": "np\u0007x"}`, nil, "mcpServers.srv.command", "control character U+0007"},
		{"command bidi", `{"command": "np\u202ex"}`, nil, "mcpServers.srv.command", "invisible formatting character U+202E"},
		{"command tilde", `{"command": "~/bin/srv"}`, nil, "mcpServers.srv.command", "~, which is not expanded"},
		{"relative command", `{"command": "./server.js"}`, nil, "mcpServers.srv.command", "is a relative path"},
		{"command reference", `{"command": "${env:SET}"}`, withEnv, "mcpServers.srv.command", "references are resolved only in args, env and headers"},
		{"relative cwd", `{"command": "x", "cwd": "proj"}`, nil, "mcpServers.srv.cwd", "is a relative path"},
		{"cwd reference", `{"command": "x", "cwd": "${HOME}/p"}`, withEnv, "mcpServers.srv.cwd", "references are resolved only"},
		{"args not an array", `{"command": "x", "args": "-y pkg"}`, nil, "mcpServers.srv.args", "must be an array of strings"},
		{"arg a number", `{"command": "x", "args": ["--port", 3000]}`, nil, "mcpServers.srv.args[1]", "must be a string (write it in quotes)"},
		{"arg NUL", `{"command": "x", "args": ["a\u0000b"]}`, nil, "mcpServers.srv.args[0]", "NUL"},
		{"arg escape", `{"command": "x", "args": ["\u001b[31m"]}`, nil, "mcpServers.srv.args[0]", "control character U+001B"},
		{"arg too long", `{"command": "x", "args": ["` + long + `"]}`, nil, "mcpServers.srv.args[0]", "at most 32768"},
		{"arg too long once resolved", `{"command": "x", "args": ["${BIG}"]}`, withEnv, "mcpServers.srv.args[0]", "once its references are resolved"},
		{"too many args", `{"command": "x", "args": ` + manyArgs + `}`, nil, "mcpServers.srv.args", "at most 1024"},
		{"env not an object", `{"command": "x", "env": ["A=b"]}`, nil, "mcpServers.srv.env", "must be an object"},
		{"env number", `{"command": "x", "env": {"PORT": 3000}}`, nil, "mcpServers.srv.env.PORT", "must be a string (write it in quotes)"},
		{"env bad name", `{"command": "x", "env": {"A=B": "c"}}`, nil, `mcpServers.srv.env["A=B"]`, "is not a variable name"},
		{"env digit name", `{"command": "x", "env": {"1A": "c"}}`, nil, "mcpServers.srv.env.1A", "is not a variable name"},
		{"env NUL value", `{"command": "x", "env": {"A": "x\u0000y"}}`, nil, "mcpServers.srv.env.A", "NUL byte"},
		{"too many env", `{"command": "x", "env": {` + strings.Join(manyEnv, ",") + `}}`, nil, "mcpServers.srv.env", "at most 256"},
		{"reference without lookup", `{"command": "x", "env": {"A": "${env:SET}"}}`, noEnv, "mcpServers.srv.env.A", "resolves no environment references"},
		{"own variable", `{"command": "x", "env": {"A": "${TOOLGATE_TOKEN}"}}`, withEnv, "mcpServers.srv.env.A", "TOOLGATE_ variables are toolgate's own"},
		{"own variable, other case", `{"command": "x", "env": {"A": "${env:toolgate_token}"}}`, withEnv, "mcpServers.srv.env.A", "TOOLGATE_ variables"},
		{"unset variable", `{"command": "x", "env": {"A": "${MISSING}"}}`, withEnv, "mcpServers.srv.env.A", "MISSING, which is not set"},
		{"VS Code input", `{"command": "x", "env": {"A": "${input:token}"}}`, withEnv, "mcpServers.srv.env.A", "${input:…} reference is not one toolgate resolves"},
		{"VS Code variable", `{"command": "x", "args": ["${workspaceFolder}"]}`, withEnv, "mcpServers.srv.args[0]", "VS Code variable"},
		{"bad env reference", `{"command": "x", "env": {"A": "${env:A B}"}}`, withEnv, "mcpServers.srv.env.A", "needs a variable name"},
		{"url scheme", `{"url": "ftp://a.example.com/x"}`, nil, "mcpServers.srv.url", "must be an http:// or https:// URL"},
		{"url relative", `{"url": "/mcp"}`, nil, "mcpServers.srv.url", "must be an http:// or https:// URL"},
		{"url without host", `{"url": "https:///mcp"}`, nil, "mcpServers.srv.url", "with a host"},
		{"url fragment", `{"url": "https://a.example.com/mcp#x"}`, nil, "mcpServers.srv.url", "#fragment"},
		{"url space", `{"url": "https://a.example.com/m cp"}`, nil, "mcpServers.srv.url", "space or a control character"},
		{"url reference", `{"url": "https://a.example.com/${env:SET}"}`, withEnv, "mcpServers.srv.url", "put the credential in headers"},
		{"userinfo and Authorization", `{"url": "https://u:p@a.example.com", "headers": {"Authorization": "Bearer x"}}`, nil, "mcpServers.srv.url", "userinfo"},
		{"credential over plain http", `{"url": "http://mcp.example.com/mcp", "headers": {"X-Key": "k"}}`, nil, "mcpServers.srv.url", "cross the network in clear: use https://"},
		{"query credential over plain http", `{"url": "http://mcp.example.com/mcp?token=abc"}`, nil, "mcpServers.srv.url", "use https://"},
		{"duplicate credential parameter", `{"url": "https://a.example.com/?key=1&key=2"}`, nil, "mcpServers.srv.url", `credential query parameter "key" twice`},
		{"bare token in query", `{"url": "https://a.example.com/?ghp_0123456789abcdef"}`, nil, "mcpServers.srv.url", "with no name"},
		{"headers not an object", `{"url": "https://a.example.com", "headers": ["A: b"]}`, nil, "mcpServers.srv.headers", "must be an object"},
		{"header name", `{"url": "https://a.example.com", "headers": {"X Key": "v"}}`, nil, `mcpServers.srv.headers["X Key"]`, "is not a header name"},
		{"managed header", `{"url": "https://a.example.com", "headers": {"host": "evil.example.com"}}`, nil, "mcpServers.srv.headers.host", "set by the HTTP transport"},
		{"session header", `{"url": "https://a.example.com", "headers": {"Mcp-Session-Id": "x"}}`, nil, "mcpServers.srv.headers.Mcp-Session-Id", "set by the HTTP transport"},
		{"header CRLF", `{"url": "https://a.example.com", "headers": {"X-A": "v\r\nX-Injected: 1"}}`, nil, "mcpServers.srv.headers.X-A", "line break"},
		{"too many headers", `{"url": "https://a.example.com", "headers": {` + strings.Join(manyHeaders, ",") + `}}`, nil, "mcpServers.srv.headers", "at most 64"},
		{"isolation", `{"command": "x", "isolation": "per-call"}`, nil, "mcpServers.srv.isolation", `must be "shared"`},
		{"required", `{"command": "x", "required": "yes"}`, nil, "mcpServers.srv.required", "must be true or false"},
		{"callTimeout a number", `{"command": "x", "callTimeout": 30000}`, nil, "mcpServers.srv.callTimeout", "must be a string"},
		{"callTimeout not a duration", `{"command": "x", "callTimeout": "30"}`, nil, "mcpServers.srv.callTimeout", `such as "90s"`},
		{"callTimeout too short", `{"command": "x", "callTimeout": "500ms"}`, nil, "mcpServers.srv.callTimeout", "from 1s to 24h0m0s"},
		{"callTimeout too long", `{"command": "x", "callTimeout": "25h"}`, nil, "mcpServers.srv.callTimeout", "from 1s to 24h0m0s"},
		{"callTimeout negative", `{"command": "x", "callTimeout": "-1m"}`, nil, "mcpServers.srv.callTimeout", `or "none"`},
		{"disabled", `{"command": "x", "disabled": 1}`, nil, "mcpServers.srv.disabled", "must be true or false"},
		{"description", `{"command": "x", "description": "a\nb"}`, nil, "mcpServers.srv.description", "control character"},
		{"unknown member", `{"command": "x", "restart": "always"}`, nil, "mcpServers.srv.restart", "is not a member toolgate knows"},
		{"case-variant member", `{"Command": "x"}`, nil, "mcpServers.srv.Command", `did you mean "command"?`},
		{"envFile", `{"command": "x", "envFile": "${workspaceFolder}/.env"}`, nil, "mcpServers.srv.envFile", "put the variables in env"},
		{"excludeTools", `{"command": "x", "excludeTools": ["delete"]}`, nil, "mcpServers.srv.excludeTools", "grant only the tools you want"},
		{"oauth endpoint", `{"url": "https://a.example.com", "oauth": {"authorizationUrl": "https://evil.example/authorize"}}`, nil, "mcpServers.srv.oauth.authorizationUrl", "endpoints come from the server's metadata"},
		{"oauth not an object", `{"url": "https://a.example.com", "oauth": true}`, nil, "mcpServers.srv.oauth", "must be an object"},
		{"oauth on stdio", `{"command": "x", "oauth": {"clientId": "a"}}`, nil, "mcpServers.srv.oauth", "only for HTTP servers"},
		{"oauth secret without id", `{"url": "https://a.example.com", "oauth": {"clientSecret": "s3cr3t"}}`, nil, "mcpServers.srv.oauth", "no clientId"},
		{"oauth machine without secret", `{"url": "https://a.example.com", "oauth": {"grant": "client_credentials", "clientId": "m"}}`, nil, "mcpServers.srv.oauth", "needs clientSecret or privateKey"},
		{"oauth bad grant", `{"url": "https://a.example.com", "oauth": {"grant": "password"}}`, nil, "mcpServers.srv.oauth.grant", "must be"},
		{"oauth both spellings", `{"url": "https://a.example.com", "oauth": {"clientId": "a", "client_id": "b"}}`, nil, "mcpServers.srv.oauth.client_id", "keep one"},
		{"oauth with Authorization", `{"url": "https://a.example.com", "headers": {"Authorization": "Bearer x"}, "oauth": {"clientId": "a"}}`, nil, "mcpServers.srv.oauth", "keep one"},
		{"oauth scope with a quote", `{"url": "https://a.example.com", "oauth": {"scopes": ["a\"b"]}}`, nil, "mcpServers.srv.oauth.scopes", "scope names"},
		{"oauth http metadata url", `{"url": "https://a.example.com", "oauth": {"clientMetadataUrl": "http://a.example.com/c"}}`, nil, "mcpServers.srv.oauth.clientMetadataUrl", "https"},
		{"pin", `{"command": "x", "pin": {}}`, nil, "mcpServers.srv.pin", "reserved"},
		{"duplicate inside env", `{"command": "x", "env": {"A": "1", "A": "2"}}`, nil, "mcpServers.srv", `duplicate member "A"`},
		{"case-variant headers", `{"url": "https://a.example.com", "headers": {"X-Key": "1", "x-key": "2"}}`, nil, "mcpServers.srv", "differ only in case"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := `{"mcpServers": {"srv": ` + c.entry + `, "ok": {"command": "npx"}}}`
			r := mcpconfig.Parse([]byte(doc), testHasher{}, c.opts)
			if len(r.Diagnostics) != 0 || len(r.Entries) != 2 {
				t.Fatalf("document diagnostics %v, %d entries", r.Diagnostics, len(r.Entries))
			}
			e := r.Entries[0]
			if e.OK() || e.Secrets != nil {
				t.Fatalf("entry accepted (diagnostics %v)", e.Diagnostics)
			}
			if !r.Entries[1].OK() || r.Status() != mcpconfig.StatusPartial {
				t.Errorf("the good entry beside it: %v, status %s", r.Entries[1].Diagnostics, r.Status())
			}
			found := false
			for _, d := range e.Diagnostics {
				if d.Severity == mcpconfig.Error && d.Path == c.path && strings.Contains(d.Message, c.want) {
					found = true
				}
			}
			if !found {
				t.Errorf("no error at %s saying %q; got %v", c.path, c.want, e.Diagnostics)
			}
		})
	}
}

func TestNames(t *testing.T) {
	for key, want := range map[string]string{
		"github":                       "github",
		"GitHub":                       "github",
		"my server":                    "my-server",
		"remote.api":                   "remote-api",
		"@modelcontextprotocol/fs":     "modelcontextprotocol-fs",
		"__private":                    "private",
		"a--b__c":                      "a-b__c",
		"Über Tool ✓":                  "ber-tool",
		"x" + strings.Repeat("y", 80):  "x" + strings.Repeat("y", 63),
		strings.Repeat("a", 63) + ".b": strings.Repeat("a", 63),
		"2fa":                          "2fa",
	} {
		got, err := mcpconfig.NormalizeName(key)
		if err != nil || got != want {
			t.Errorf("NormalizeName(%q) = %q, %v; want %q", key, got, err, want)
		}
	}
	for _, key := range []string{"", "---", "✓✓", "local", "Server", "TOOLGATE", " toolgate "} {
		if got, err := mcpconfig.NormalizeName(key); err == nil {
			t.Errorf("NormalizeName(%q) = %q, want an error", key, got)
		}
	}
	r := mcpconfig.Parse([]byte(`{"mcpServers": {"my server": {"command": "a"}, "my-server": {"command": "b"}, "my.server": {"command": "c"}, "other": {"command": "d"}}}`), testHasher{}, nil)
	if r.Status() != mcpconfig.StatusPartial {
		t.Fatalf("status %s", r.Status())
	}
	for _, e := range r.Entries[:3] {
		if e.OK() || !strings.Contains(fmt.Sprint(e.Diagnostics), `is the server name "my-server", as is`) {
			t.Errorf("%s: %v", e.Key, e.Diagnostics)
		}
	}
	for _, key := range []string{"", " ", strings.Repeat("k", mcpconfig.MaxKeyBytes+1), "a\u0000b", "a\u200bb", "local"} {
		k, _ := json.Marshal(key)
		doc := fmt.Sprintf(`{"mcpServers": {%s: {"command": "x"}}}`, k)
		if r := mcpconfig.Parse([]byte(doc), testHasher{}, nil); len(r.Entries) != 1 || r.Entries[0].OK() {
			t.Errorf("server key %q: %v, %+v", key, r.Diagnostics, r.Entries)
		}
	}
}

// TestDiagnosticsBounded: an entry with many problems keeps MaxDiagnostics of them and
// counts the rest.
func TestDiagnosticsBounded(t *testing.T) {
	var members []string
	for i := range 100 {
		members = append(members, fmt.Sprintf(`"unknown%d": 1`, i))
	}
	doc := `{"mcpServers": {"srv": {"command": "x", ` + strings.Join(members, ",") + `}}}`
	e := mcpconfig.Parse([]byte(doc), testHasher{}, nil).Entries[0]
	if len(e.Diagnostics) != mcpconfig.MaxDiagnostics+1 || !strings.Contains(e.Diagnostics[mcpconfig.MaxDiagnostics].Message, "68 more problems not shown") {
		t.Errorf("%d diagnostics, last %v", len(e.Diagnostics), e.Diagnostics[len(e.Diagnostics)-1])
	}
}

// TestResolvedPathBounded: a relative command resolved against a long cwd is held to
// the same bound as an absolute one, so what Parse accepts always validates.
func TestResolvedPathBounded(t *testing.T) {
	cwd := "/" + strings.Repeat("d", mcpconfig.MaxPathBytes-10)
	doc := fmt.Sprintf(`{"mcpServers": {"srv": {"cwd": %q, "command": "./%s"}}}`, cwd, strings.Repeat("c", 20))
	e := mcpconfig.Parse([]byte(doc), testHasher{}, nil).Entries[0]
	if e.OK() || !strings.Contains(fmt.Sprint(e.Diagnostics), "once resolved against cwd") {
		t.Errorf("accepted or wrong error: %v", e.Diagnostics)
	}
}
