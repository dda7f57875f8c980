package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/upstreamauth/upstreamauthtest"
)

// TestOAuthAudit: every token-related request of a remote server's sign-in is an
// audit event (docs/audit.md, "Sign-ins") — the registration, the authorization
// response, the code exchange, a refresh, the refused refresh of a revoked grant —
// naming the endpoint and the outcome, and no event holds a token or a secret.
func TestOAuthAudit(t *testing.T) {
	canary := "tgoaudit" + fmt.Sprint(time.Now().UnixNano())
	f, a, _ := installProtected(t, canary)
	ctx := context.Background()
	call := func() error {
		_, err := a.Upstreams().Call(ctx, "prot", "tools/call", json.RawMessage(`{"name":"echo","arguments":{"x":1}}`), host.CallOptions{})
		return err
	}
	_ = call() // parks: login_required
	waitState(t, a, "prot", host.StateAuthRequired)
	signIn(t, a, "prot")
	f.ExpireAccessTokens()
	if err := call(); err != nil {
		t.Fatalf("call after expiry: %v", err)
	}
	f.RevokeRefreshTokens()
	f.ExpireAccessTokens()
	_ = call() // the refused refresh parks it: grant_revoked

	evs, err := a.Store().ListAudit(ctx, audit.Filter{Resource: "mcp:prot"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		if !strings.HasPrefix(e.Action, "oauth.") {
			continue
		}
		got = append(got, fmt.Sprintf("%s %s %s", e.Action, e.Decision, e.Code))
		if e.Tool != "prot.*" || e.Principal != "toolgate" || !strings.Contains(e.Message, f.Issuer) || strings.Contains(e.Message, "?") {
			t.Errorf("event %+v: want tool prot.*, principal toolgate, the endpoint without a query in the message", e)
		}
	}
	want := []string{"oauth.registration allowed ", "oauth.authorize allowed ", "oauth.token allowed ",
		"oauth.refresh allowed ", "oauth.refresh denied oauth_refused"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("sign-in events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	all, _ := a.Store().ListAudit(ctx, audit.Filter{})
	b, _ := json.Marshal(all)
	if strings.Contains(string(b), canary) {
		t.Errorf("a token or secret of the sign-in is in the audit trail")
	}
}

// installProtected installs the OAuth fixture's MCP server as "prot" (no credentials)
// in a fresh App; canary is in every token and secret the fixture issues.
func installProtected(t *testing.T, canary string) (*upstreamauthtest.Fixture, *app.App, mgmt.Manager) {
	t.Helper()
	f := upstreamauthtest.New(t, upstreamauthtest.Options{Canary: canary})
	a, m, _ := managed(t)
	doc := fmt.Sprintf(`{"mcpServers":{"prot":{"url":%q}}}`, f.URL)
	if res, err := m.Install(context.Background(), owner, mgmt.InstallParams{ConfigJSON: doc}); err != nil || res.Status != mgmt.InstallOK {
		t.Fatalf("install: %+v %v", res, err)
	}
	return f, a, m
}
