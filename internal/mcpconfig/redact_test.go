package mcpconfig_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/keystore"
	"github.com/toolgate/toolgate/internal/mcpconfig"
)

// TestRedacted: the transport exactly as responses show it.
func TestRedacted(t *testing.T) {
	ref := func(server, name string) string {
		return keystore.Ref{Scope: "workspace:ws_1", Server: server, Name: name}.ID()
	}
	cases := []struct{ doc, want string }{
		{
			`{"mcpServers": {"filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/alexander/Code"], "env": {}}}}`,
			`{"kind":"stdio","command":"npx","args":["-y","@modelcontextprotocol/server-filesystem","/Users/alexander/Code"]}`,
		},
		{
			`{"mcpServers": {"remote-api": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer abc"}}}}`,
			`{"kind":"http","url":"https://mcp.example.com/mcp","headers":{"Authorization":{"secret_ref":"` + ref("remote-api", "header.Authorization") + `"}}}`,
		},
		{
			`{"mcpServers": {"gh": {"command": "docker", "args": ["run", "-e", "GITHUB_TOKEN=ghp_0123456789abcdef", "img"], "env": {"GITHUB_TOKEN": "x"}, "cwd": "/srv"}}}`,
			`{"kind":"stdio","command":"docker","args":["run","-e","GITHUB_TOKEN=[redacted]","img"],"cwd":"/srv","env":{"GITHUB_TOKEN":{"secret_ref":"` + ref("gh", "env.GITHUB_TOKEN") + `"}}}`,
		},
		{
			`{"mcpServers": {"q": {"type": "sse", "url": "https://u:p@h.example.com/sse?region=eu&token=t"}}}`,
			`{"kind":"sse","url":"https://h.example.com/sse?region=eu&token=[redacted]","query":{"token":{"secret_ref":"` + ref("q", "query.token") +
				`"}},"headers":{"Authorization":{"secret_ref":"` + ref("q", "header.Authorization") + `"}}}`,
		},
	}
	for _, c := range cases {
		r := mcpconfig.Parse([]byte(c.doc), testHasher{}, nil)
		if r.Status() != mcpconfig.StatusOK {
			t.Fatalf("%s: %v", c.doc, r.Entries)
		}
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(r.Entries[0].Server.Redacted("workspace:ws_1")); err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(b.String()); got != c.want {
			t.Errorf("redacted\n got %s\nwant %s", got, c.want)
		}
	}
	// The ref depends on the scope: the same server in two scopes has two secrets.
	r := mcpconfig.Parse([]byte(cases[1].doc), testHasher{}, nil)
	s := r.Entries[0].Server
	if reflect.DeepEqual(s.Redacted("user").Headers, s.Redacted("workspace:ws_1").Headers) {
		t.Error("two scopes show the same secret ref")
	}
}
