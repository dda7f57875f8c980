package app_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/app"
)

// TestBridgeTokenOpensOnlyItsBridge: a token minted for one bridge session opens
// that bridge and nothing else — not another bridge of the same principal (which
// may have been opened with wider --capability values) and not toolgate serve's
// Authenticate. Before, any valid token of the principal opened every bridge and
// the daemon, so a harness given a narrowed bridge's token could step outside
// its capabilities.
func TestBridgeTokenOpensOnlyItsBridge(t *testing.T) {
	a, err := app.Open(context.Background(), app.Options{DataDir: filepath.Join(t.TempDir(), "data")})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	tokA, err := a.MintBridgeToken("alice", "sessA", 60)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := a.MintToken("alice", "sessA", 60) // a serve token naming the same id
	if err != nil {
		t.Fatal(err)
	}
	tokB, err := a.MintBridgeToken("bob", "sessA", 60)
	if err != nil {
		t.Fatal(err)
	}
	bridgeA := a.BridgeAuthorizer("alice", "sessA")
	cases := []struct {
		name  string
		auth  func(string, bool) bool
		token string
		want  bool
	}{
		{"own bridge token", bridgeA, tokA, true},
		{"absent", bridgeA, "", false},
		{"another bridge of the same principal", a.BridgeAuthorizer("alice", "sessOther"), tokA, false},
		{"a serve token naming the bridge's id", bridgeA, plain, false},
		{"another principal's bridge token", bridgeA, tokB, false},
		{"no session id yet", a.BridgeAuthorizer("alice", ""), tokA, false},
		{"tampered", bridgeA, tokA[:len(tokA)-2] + "AA", false},
	}
	for _, c := range cases {
		if got := c.auth(c.token, c.token != ""); got != c.want {
			t.Errorf("%s: accepted = %v, want %v", c.name, got, c.want)
		}
	}
	authn := a.Authenticate("")
	if p, ok := authn(tokA, true); ok {
		t.Errorf("toolgate serve accepted a bridge token (principal %q)", p)
	}
	if p, ok := authn(plain, true); !ok || p != "alice" {
		t.Errorf("toolgate serve refused a plain execution token: %q %v", p, ok)
	}
	if _, err := a.MintBridgeToken("alice", "", 60); err == nil {
		t.Error("a bridge token without a session id was minted")
	}
}
