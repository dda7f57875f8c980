package mcpconfig_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/mcpconfig"
)

// TestOAuthMember: the oauth member is read in either spelling; its secret moves to
// the keystore's secrets (the definition keeps its name and digest, never the value),
// scopes are sorted and deduplicated, and it enters the fingerprint while a definition
// without it keeps its old one.
func TestOAuthMember(t *testing.T) {
	const secret = "tgoauthsecret-9f3a"
	doc := `{"mcpServers": {"s": {"url": "https://a.example.com/mcp", "oauth": {"clientId": "toolgate-app", "clientSecret": "` + secret + `", "scopes": "write read read", "issuer": "https://as.example.com"}}}}`
	r := mcpconfig.Parse([]byte(doc), testHasher{}, nil)
	if r.Status() != mcpconfig.StatusOK {
		t.Fatalf("status %s: %v", r.Status(), r.Entries[0].Diagnostics)
	}
	e := r.Entries[0]
	o := e.Server.Transport.OAuth
	if o == nil || o.ClientID != "toolgate-app" || o.Issuer != "https://as.example.com" || !slices.Equal(o.Scopes, []string{"read", "write"}) || o.ClientSecret.Secret != "oauth.client_secret" {
		t.Fatalf("oauth: %+v", o)
	}
	b, _ := json.Marshal(e.Server)
	if strings.Contains(string(b), secret) {
		t.Fatalf("the client secret is in the definition: %s", b)
	}
	if len(e.Secrets) != 1 || e.Secrets[0].Name != "oauth.client_secret" || e.Secrets[0].Value.RevealString() != secret {
		t.Fatalf("secrets: %v", e.Secrets)
	}
	snake := mcpconfig.Parse([]byte(strings.NewReplacer("clientId", "client_id", "clientSecret", "client_secret").Replace(doc)), testHasher{}, nil)
	if fp := snake.Entries[0].Server.Fingerprint(); fp != e.Server.Fingerprint() {
		t.Fatalf("snake_case spelling changed the fingerprint")
	}
	plain := mcpconfig.Parse([]byte(`{"mcpServers": {"s": {"url": "https://a.example.com/mcp"}}}`), testHasher{}, nil)
	if plain.Entries[0].Server.Fingerprint() == e.Server.Fingerprint() {
		t.Fatal("oauth does not enter the fingerprint")
	}
	off := mcpconfig.Parse([]byte(`{"mcpServers": {"s": {"url": "https://a.example.com/mcp", "oauth": {"enabled": false}}}}`), testHasher{}, nil)
	if o := off.Entries[0].Server.Transport.OAuth; o == nil || !o.Disabled || off.Status() != mcpconfig.StatusOK {
		t.Fatalf("enabled false: %+v %v", o, off.Entries[0].Diagnostics)
	}
}
