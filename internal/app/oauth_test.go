package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/upstreamauth"
	"github.com/toolgate/toolgate/internal/upstreamauth/upstreamauthtest"
)

// TestRemoteOAuth: a remote server behind OAuth, installed with no credentials, parks
// in auth_required at its first 401 (discovery, nothing more sent), with the sign-in
// in details; a login (dynamic registration, PKCE, the loopback redirect) brings it to
// ready and its tools answer; an expired token is refreshed; a revoked grant parks it
// again with no further requests; no token is in any answer.
func TestRemoteOAuth(t *testing.T) {
	canary := "tgoauth" + fmt.Sprint(time.Now().UnixNano())
	f, a, m := installProtected(t, canary)
	ctx := context.Background()
	call := func() (json.RawMessage, error) {
		return a.Upstreams().Call(ctx, "prot", "tools/call", json.RawMessage(`{"name":"echo","arguments":{"x":1}}`), host.CallOptions{})
	}
	if _, err := call(); !errors.Is(err, host.ErrAuthRequired) {
		t.Fatalf("call with no sign-in: %v", err)
	}
	waitState(t, a, "prot", host.StateAuthRequired)
	mcpN, asN := f.MCPTotal(), f.ASRequests()
	for range 3 {
		if _, err := call(); !errors.Is(err, host.ErrAuthRequired) {
			t.Fatalf("call while auth_required: %v", err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if f.MCPTotal() != mcpN || f.ASRequests() != asN {
		t.Fatalf("requests while parked: mcp %d→%d, authorization server %d→%d", mcpN, f.MCPTotal(), asN, f.ASRequests())
	}
	det := details(t, m, canary)
	var st upstreamauth.Status
	if err := json.Unmarshal(det.Auth, &st); err != nil || st.State != upstreamauth.StateSignInRequired || st.Reason != "login_required" {
		t.Fatalf("details.auth: %s %v", det.Auth, err)
	}

	signIn(t, a, "prot")
	res, err := call()
	if err != nil || !strings.Contains(string(res), "echo") {
		t.Fatalf("call after sign-in: %s %v", res, err)
	}
	if f.Registrations() != 1 {
		t.Fatalf("%d dynamic registrations, want 1", f.Registrations())
	}

	f.ExpireAccessTokens()
	if res, err := call(); err != nil {
		t.Fatalf("call after expiry: %s %v", res, err)
	}
	refreshed := 0
	for _, r := range f.TokenRequests() {
		if r.GrantType == "refresh_token" && r.Status == 200 {
			refreshed++
			if len(r.Resource) != 1 || r.Resource[0] != f.URL {
				t.Fatalf("refresh without the resource indicator: %+v", r)
			}
		}
	}
	if refreshed != 1 {
		t.Fatalf("%d refreshes, want 1", refreshed)
	}

	f.RevokeRefreshTokens()
	f.ExpireAccessTokens()
	if _, err := call(); !errors.Is(err, host.ErrAuthRequired) {
		t.Fatalf("call after the grant was revoked: %v", err)
	}
	waitState(t, a, "prot", host.StateAuthRequired)
	mcpN, asN = f.MCPTotal(), f.ASRequests()
	for range 3 {
		_, _ = call()
	}
	time.Sleep(200 * time.Millisecond)
	if f.MCPTotal() != mcpN || f.ASRequests() != asN {
		t.Fatalf("requests after revocation: mcp %d→%d, authorization server %d→%d", mcpN, f.MCPTotal(), asN, f.ASRequests())
	}
	det = details(t, m, canary)
	if err := json.Unmarshal(det.Auth, &st); err != nil || st.State != upstreamauth.StateSignInRequired || st.Reason != "grant_revoked" {
		t.Fatalf("details.auth after revocation: %s %v", det.Auth, err)
	}

	// Uninstalling forgets the sign-in: the same name installed again starts signed out.
	if _, err := m.Uninstall(ctx, owner, mgmt.UninstallParams{ServerRef: mgmt.ServerRef{Name: "prot"}}); err != nil {
		t.Fatal(err)
	}
}

func details(t *testing.T, m mgmt.Manager, canary string) *mgmt.DetailsResult {
	t.Helper()
	det, err := m.Details(context.Background(), owner, mgmt.DetailsParams{ServerRef: mgmt.ServerRef{Name: "prot"}})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(det); strings.Contains(string(b), canary) {
		t.Fatalf("a secret is in details: %s", b)
	}
	return det
}

// TestRemoteOAuthConfigured: the oauth member's clients are used. A machine client
// (client_credentials) gets its token with no person and the server answers at once;
// a pre-registered client signs in with no dynamic registration. The client secrets
// are in no answer.
func TestRemoteOAuthConfigured(t *testing.T) {
	const machineSecret, appSecret = "tgmachine-secret-41", "tgapp-secret-77"
	f := upstreamauthtest.New(t, upstreamauthtest.Options{MachineClients: map[string]string{"robot": machineSecret},
		Clients: map[string]string{"tg-app": appSecret}})
	a, m, _ := managed(t)
	ctx := context.Background()
	doc := fmt.Sprintf(`{"mcpServers":{
		"machine":{"url":%q,"oauth":{"grant":"client_credentials","clientId":"robot","clientSecret":%q}},
		"person":{"url":%q,"oauth":{"clientId":"tg-app","clientSecret":%q,"scopes":["read"]}}}}`, f.URL, machineSecret, f.URL, appSecret)
	res, err := m.Install(ctx, owner, mgmt.InstallParams{ConfigJSON: doc})
	if err != nil || res.Status != mgmt.InstallOK {
		t.Fatalf("install: %+v %v", res, err)
	}
	if b, _ := json.Marshal(res); strings.Contains(string(b), machineSecret) || strings.Contains(string(b), appSecret) {
		t.Fatalf("a client secret is in the install's answer: %s", b)
	}
	out, err := a.Upstreams().Call(ctx, "machine", "tools/call", json.RawMessage(`{"name":"echo","arguments":{}}`), host.CallOptions{})
	if err != nil || !strings.Contains(string(out), "echo") {
		t.Fatalf("machine call: %s %v", out, err)
	}
	if _, err := a.Upstreams().Call(ctx, "person", "tools/list", json.RawMessage(`{}`), host.CallOptions{}); !errors.Is(err, host.ErrAuthRequired) {
		t.Fatalf("person call before sign-in: %v", err)
	}
	signIn(t, a, "person")
	if f.Registrations() != 0 {
		t.Fatalf("%d dynamic registrations with pre-registered clients", f.Registrations())
	}
	var cc, code int
	for _, r := range f.TokenRequests() {
		switch {
		case r.GrantType == "client_credentials" && r.ClientID == "robot" && r.Status == 200:
			cc++
		case r.GrantType == "authorization_code" && r.ClientID == "tg-app" && r.Status == 200:
			code++
		}
	}
	if cc != 1 || code != 1 {
		t.Fatalf("token requests: %+v", f.TokenRequests())
	}
	ar, err := m.(mgmt.AuthManager).AuthStatus(ctx, owner, mgmt.AuthParams{ServerRef: mgmt.ServerRef{Name: "person"}})
	var st upstreamauth.Status
	if err != nil || json.Unmarshal(ar.Auth, &st) != nil || st.State != upstreamauth.StateSignedIn || st.ClientID != "tg-app" {
		t.Fatalf("status: %+v %v", ar, err)
	}
	// Logout parks it again: the next call sends nothing.
	if _, err := m.(mgmt.AuthManager).AuthLogout(ctx, owner, mgmt.AuthLogoutParams{ServerRef: mgmt.ServerRef{Name: "person"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Upstreams().Call(ctx, "person", "tools/list", json.RawMessage(`{}`), host.CallOptions{}); !errors.Is(err, host.ErrAuthRequired) {
		t.Fatalf("call after logout: %v", err)
	}
	// Asking about a server that does not sign in is a conflict, not a crash.
	var me *mgmt.Error
	if _, err := m.(mgmt.AuthManager).AuthLoginStart(ctx, owner, mgmt.AuthLoginStartParams{ServerRef: mgmt.ServerRef{Name: "nope"}}); !errors.As(err, &me) || me.Code != mgmt.CodeUnknownServer {
		t.Fatalf("login to an unknown server: %v", err)
	}
	if _, err := m.(mgmt.AuthManager).AuthLoginComplete(ctx, owner, mgmt.AuthLoginCompleteParams{ServerRef: mgmt.ServerRef{Name: "machine"}}); !errors.As(err, &me) || me.Code != mgmt.CodeConflict {
		t.Fatalf("complete with no login: %v", err)
	}
	// A pasted URL that is not this login's callback is refused, and nothing is
	// exchanged: another host, another state, a script URL, a huge one.
	am := m.(mgmt.AuthManager)
	for _, bad := range []string{"http://evil.example/callback?code=c&state=s", "javascript:alert(1)",
		"http://127.0.0.1:1/callback?code=c&state=" + strings.Repeat("x", 20000)} {
		start, err := am.AuthLoginStart(ctx, owner, mgmt.AuthLoginStartParams{ServerRef: mgmt.ServerRef{Name: "person"}})
		if err != nil {
			t.Fatal(err)
		}
		n := len(f.TokenRequests())
		_, err = am.AuthLoginComplete(ctx, owner, mgmt.AuthLoginCompleteParams{ServerRef: mgmt.ServerRef{Name: "person"}, CallbackURL: bad})
		if !errors.As(err, &me) || me.Code != mgmt.CodeConflict || len(f.TokenRequests()) != n {
			t.Fatalf("pasted %.40q (login %s): %v, %d token requests", bad, start.RedirectURI, err, len(f.TokenRequests())-n)
		}
	}
	// A stdio server does not sign in.
	stdio := `{"mcpServers":{"plain":{"command":"/bin/true"}}}`
	if res, err := m.Install(ctx, owner, mgmt.InstallParams{ConfigJSON: stdio}); err != nil || res.Status != mgmt.InstallOK {
		t.Fatalf("install: %+v %v", res, err)
	}
	if _, err := am.AuthLoginStart(ctx, owner, mgmt.AuthLoginStartParams{ServerRef: mgmt.ServerRef{Name: "plain"}}); !errors.As(err, &me) || me.Code != mgmt.CodeConflict {
		t.Fatalf("login to a stdio server: %v", err)
	}
}

// signIn completes a person's login to name, playing the browser (the fixture's
// authorization endpoint redirects at once), and waits for the server to be ready.
func signIn(t *testing.T, a *app.App, name string) {
	t.Helper()
	ctx := context.Background()
	login, err := a.StartAuthLogin(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(login.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := login.Wait(ctx); err != nil {
		t.Fatalf("login: %v", err)
	}
	waitState(t, a, name, host.StateReady)
}
