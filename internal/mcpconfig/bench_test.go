package mcpconfig_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/keystore/keystoretest"
	"github.com/toolgate/toolgate/internal/mcpconfig"
)

// BenchmarkParse: a typical three-server file, and the largest document accepted
// (MaxServers entries), with the keystore's digest.
func BenchmarkParse(b *testing.B) {
	ks, _ := keystoretest.New(b)
	typical := []byte(`{"mcpServers": {
		"filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/Code"]},
		"github": {"command": "docker", "args": ["run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"],
			"env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_0123456789abcdefghij0123456789abcdef"}},
		"remote": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer abc.def.ghi"}}}}`)
	var entries []string
	for i := range mcpconfig.MaxServers {
		entries = append(entries, fmt.Sprintf(`"server-%d": {"command": "npx", "args": ["-y", "pkg-%d", "--port", "%d"], "env": {"TOKEN": "t%d", "MODE": "m"}}`, i, i, 8000+i, i))
	}
	largest := []byte(`{"mcpServers": {` + strings.Join(entries, ",") + `}}`)
	for _, c := range []struct {
		name string
		doc  []byte
	}{{"typical", typical}, {fmt.Sprintf("%d-servers", mcpconfig.MaxServers), largest}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.doc)))
			b.ReportAllocs()
			for b.Loop() {
				if r := mcpconfig.Parse(c.doc, ks, nil); r.Status() != mcpconfig.StatusOK {
					b.Fatal(r.Diagnostics)
				}
			}
		})
	}
}
