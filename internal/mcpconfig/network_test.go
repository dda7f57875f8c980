package mcpconfig_test

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/mcpconfig"
	"github.com/toolgate/toolgate/internal/netguard"
)

func TestNetworkMember(t *testing.T) {
	srv, _, _ := parseOne(t, `{"mcpServers":{"r":{"url":"https://mcp.example.com/mcp","network":{"deny":["10.0.0.0/8","192.0.2.7"],"allowHosts":["lab.example"],"denyHosts":[".corp.example"],"allow":["169.254.10.0/24"],"noDefaults":false,"loopback":"deny","denyPrivate":true,"insecureHttp":false}}}}`, nil)
	n := srv.Transport.Network
	if n == nil || len(n.Deny) != 2 || n.Loopback != "deny" || !n.DenyPrivate {
		t.Fatalf("network %+v", n)
	}
	p, err := n.Policy()
	if err != nil || len(p.Deny) != 2 || len(p.Allow) != 1 || p.Loopback != netguard.LoopbackDeny || !p.DenyPrivate || p.DenyHosts[0] != ".corp.example" {
		t.Fatalf("policy %+v %v", p, err)
	}
	plain, _, _ := parseOne(t, `{"mcpServers":{"r":{"url":"https://mcp.example.com/mcp"}}}`, nil)
	if plain.Transport.Network != nil || srv.Fingerprint() == plain.Fingerprint() {
		t.Fatal("a network member must change the fingerprint, and its absence leave none")
	}
}

func TestNetworkMemberRefusals(t *testing.T) {
	for _, tc := range []struct{ member, want string }{
		{`{"deny":["0251.0376.0251.0376"]}`, "neither a CIDR prefix nor an address"},
		{`{"deny":["10.1.2.3/8"]}`, "bits set past its length"},
		{`{"allow":"10.0.0.0/8"}`, "array of at most"},
		{`{"deny":[1]}`, "array of at most"},
		{`{"loopback":"any"}`, `"named"`},
		{`{"denyPrivate":"yes"}`, "true or false"},
		{`{"proxy":"x"}`, "not a network setting"},
		{`{"denyHosts":["ｍetadata.google.internal"]}`, "xn--"},
		{`{"deny":["10.0.0.0/8"],"deny":["11.0.0.0/8"]}`, ""},
		{`[]`, "must be an object"},
	} {
		diags := parseDiags(t, `{"mcpServers":{"r":{"url":"https://mcp.example.com/mcp","network":`+tc.member+`}}}`)
		if tc.want != "" && !strings.Contains(diags, tc.want) {
			t.Errorf("network %s: diagnostics %q, want %q", tc.member, diags, tc.want)
		}
	}
	if d := parseDiags(t, `{"mcpServers":{"s":{"command":"x","network":{}}}}`); !strings.Contains(d, "only for HTTP servers") {
		t.Errorf("a stdio server's network member: %q", d)
	}
}

// parseDiags parses a one-entry document and returns every diagnostic as text.
func parseDiags(t *testing.T, doc string) string {
	t.Helper()
	r := mcpconfig.Parse([]byte(doc), testHasher{}, nil)
	var out []string
	for _, d := range r.Diagnostics {
		out = append(out, d.Path+": "+d.Message)
	}
	for _, e := range r.Entries {
		for _, d := range e.Diagnostics {
			out = append(out, d.Path+": "+d.Message)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no diagnostics for %s", doc)
	}
	return strings.Join(out, "; ")
}
