package mcpconfig_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/mcpconfig"
)

const validateDoc = `{"mcpServers": {
	"stdio": {"command": "npx", "args": ["-y", "pkg", "--token=abc", ""], "env": {"B": "2", "A": "1"}, "cwd": "/w", "isolation": "session", "required": true, "description": "d"},
	"http": {"url": "https://u:p@h.example.com/mcp?x=1&api_key=k", "headers": {"X-A": "a"}},
	"abs": {"command": "/opt/bin/srv"}
}}`

// TestValidateRoundTrip: every definition Parse accepts validates, and survives being
// stored as JSON and read back unchanged.
func TestValidateRoundTrip(t *testing.T) {
	r := mcpconfig.Parse([]byte(validateDoc), testHasher{}, nil)
	if r.Status() != mcpconfig.StatusOK {
		t.Fatal(r.Entries)
	}
	for _, e := range r.Entries {
		roundTrip(t, e.Server)
	}
}

func roundTrip(t testing.TB, s *mcpconfig.Server) {
	t.Helper()
	if err := s.Validate(); err != nil {
		t.Fatalf("a parsed definition does not validate: %v", err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back mcpconfig.Server
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, s) || back.Fingerprint() != s.Fingerprint() {
		t.Fatalf("JSON round trip changed the definition:\n%s\n%+v", b, back)
	}
	if err := back.Validate(); err != nil {
		t.Fatalf("read back, the definition does not validate: %v", err)
	}
}

// TestValidateRefuses: a stored definition that breaks an invariant (edited by hand, or
// by a bug) is refused when read back.
func TestValidateRefuses(t *testing.T) {
	r := mcpconfig.Parse([]byte(validateDoc), testHasher{}, nil)
	byName := map[string]*mcpconfig.Server{}
	for _, e := range r.Entries {
		byName[e.Server.Name] = e.Server
	}
	cases := []struct {
		name, server string
		edit         func(s *mcpconfig.Server)
		want         string
	}{
		{"name not normal", "stdio", func(s *mcpconfig.Server) { s.Name = "Stdio" }, "not a normalised server name"},
		{"reserved name", "stdio", func(s *mcpconfig.Server) { s.Name = "local" }, "not a normalised"},
		{"empty display name", "stdio", func(s *mcpconfig.Server) { s.DisplayName = "" }, "display_name"},
		{"isolation", "stdio", func(s *mcpconfig.Server) { s.Isolation = "" }, "isolation"},
		{"kind", "stdio", func(s *mcpconfig.Server) { s.Transport.Kind = "ws" }, "transport.kind"},
		{"command with space", "stdio", func(s *mcpconfig.Server) { s.Transport.Command = "npx -y" }, "transport.command"},
		{"relative command", "stdio", func(s *mcpconfig.Server) { s.Transport.Command = "./srv" }, "transport.command"},
		{"unclean command", "abs", func(s *mcpconfig.Server) { s.Transport.Command = "/opt/../bin/srv" }, "transport.command"},
		{"relative cwd", "stdio", func(s *mcpconfig.Server) { s.Transport.Cwd = "w" }, "transport.cwd"},
		{"literal arg with control", "stdio", func(s *mcpconfig.Server) { s.Transport.Args[0].Value = "\x1b" }, "transport.args[0]"},
		{"secret arg misnamed", "stdio", func(s *mcpconfig.Server) { s.Transport.Args[2].Secret = "arg.7" }, "transport.args[2]"},
		{"secret arg with a value", "stdio", func(s *mcpconfig.Server) { s.Transport.Args[2].Value = "--token=abc" }, "transport.args[2]"},
		{"secret arg without digest", "stdio", func(s *mcpconfig.Server) { s.Transport.Args[2].Digest = "" }, "transport.args[2]"},
		{"env unsorted", "stdio", func(s *mcpconfig.Server) { e := s.Transport.Env; e[0], e[1] = e[1], e[0] }, "transport.env"},
		{"env secret elsewhere", "stdio", func(s *mcpconfig.Server) { s.Transport.Env[0].Secret = "env.B" }, "transport.env.A"},
		{"http member on stdio", "stdio", func(s *mcpconfig.Server) { s.Transport.URL = "https://x.example.com" }, "HTTP members"},
		{"stdio member on http", "http", func(s *mcpconfig.Server) { s.Transport.Command = "x" }, "stdio members"},
		{"userinfo in url", "http", func(s *mcpconfig.Server) { s.Transport.URL = "https://u:p@h.example.com/mcp" }, "userinfo"},
		{"credential in url", "http", func(s *mcpconfig.Server) { s.Transport.URL = "https://h.example.com/mcp?token=t" }, "credential query parameter"},
		{"url not normal", "http", func(s *mcpconfig.Server) { s.Transport.URL = "HTTPS://h.example.com/mcp" }, "normal form"},
		{"plain http with credentials", "http", func(s *mcpconfig.Server) { s.Transport.URL = "http://h.example.com/mcp" }, "plain http"},
		{"header not canonical", "http", func(s *mcpconfig.Server) { s.Transport.Headers[0].Name = "authorization" }, "transport.headers"},
		{"managed header", "http", func(s *mcpconfig.Server) { s.Transport.Headers[0].Name = "Host" }, "transport.headers"},
		{"query secret misnamed", "http", func(s *mcpconfig.Server) { s.Transport.Query[0].Secret = "env.api_key" }, "transport.query.api_key"},
	}
	for _, c := range cases {
		b, _ := json.Marshal(byName[c.server])
		var s mcpconfig.Server
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		c.edit(&s)
		err := s.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate = %v, want an error about %q", c.name, err, c.want)
		}
	}
}
