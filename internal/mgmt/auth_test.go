package mgmt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/mgmt/mgmttest"
)

// authFake is a Manager with the sign-in methods, recording what reached them.
type authFake struct {
	mgmt.Manager
	got []any
}

func (f *authFake) AuthStatus(_ context.Context, _ mgmt.Caller, p mgmt.AuthParams) (*mgmt.AuthStatusResult, error) {
	f.got = append(f.got, p)
	return &mgmt.AuthStatusResult{Auth: json.RawMessage(`{"server":"` + p.Name + `","state":"signed_in"}`)}, nil
}

func (f *authFake) AuthLoginStart(_ context.Context, _ mgmt.Caller, p mgmt.AuthLoginStartParams) (*mgmt.AuthLoginStartResult, error) {
	f.got = append(f.got, p)
	return &mgmt.AuthLoginStartResult{Server: p.Name, URL: "https://as.example/authorize?state=s", RedirectURI: "http://127.0.0.1:1/callback", ExpiresAt: 1}, nil
}

func (f *authFake) AuthLoginComplete(_ context.Context, _ mgmt.Caller, p mgmt.AuthLoginCompleteParams) (*mgmt.AuthStatusResult, error) {
	f.got = append(f.got, p)
	return &mgmt.AuthStatusResult{Auth: json.RawMessage(`{}`)}, nil
}

func (f *authFake) AuthLogout(_ context.Context, _ mgmt.Caller, p mgmt.AuthLogoutParams) (*mgmt.AuthStatusResult, error) {
	f.got = append(f.got, p)
	return &mgmt.AuthStatusResult{Auth: json.RawMessage(`{}`)}, nil
}

// TestAuthMethods: the sign-in methods read their params strictly (a wrong type or an
// unknown member names the field; a server address is required), reach the Manager
// with them decoded, and are method_not_found for a Manager without them.
func TestAuthMethods(t *testing.T) {
	f := &authFake{Manager: mgmttest.NewSeeded()}
	stack, _ := serveStack(t, f, mgmt.Options{})
	rpc := func(method, params string) string {
		_, answer := post(t, stack, ownerToken, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, method, params))
		return answer
	}
	for _, c := range []struct{ method, params, field string }{
		{mgmt.MethodAuthStatus, `{"name":1}`, "name"},
		{mgmt.MethodAuthLoginStart, `{"name":"a","headless":"yes"}`, "headless"},
		{mgmt.MethodAuthLoginComplete, `{"name":"a","callback_url":true}`, "callback_url"},
		{mgmt.MethodAuthLogout, `{"name":"a","revoke":null}`, "revoke"},
		{mgmt.MethodAuthLogout, `{"name":"a","token":"x"}`, "token"},
		{mgmt.MethodAuthStatus, `{}`, "name"},
	} {
		if code, field := errorOf(t, rpc(c.method, c.params)); code != mgmt.CodeInvalidParams || field != c.field {
			t.Errorf("%s %s: %s field %q, want invalid_params %q", c.method, c.params, code, field, c.field)
		}
	}
	if len(f.got) != 0 {
		t.Fatalf("refused params reached the manager: %+v", f.got)
	}
	if a := rpc(mgmt.MethodAuthLoginStart, `{"name":"a","headless":true}`); !strings.Contains(a, `"url":"https://as.example/authorize?state=s"`) {
		t.Fatalf("login_start: %s", a)
	}
	rpc(mgmt.MethodAuthLoginComplete, `{"name":"a","callback_url":"http://127.0.0.1:1/callback?code=c&state=s"}`)
	rpc(mgmt.MethodAuthLogout, `{"name":"a","revoke":true}`)
	if a := rpc(mgmt.MethodAuthStatus, `{"name":"a"}`); !strings.Contains(a, `"auth":{"server":"a","state":"signed_in"}`) {
		t.Fatalf("status: %s", a)
	}
	if len(f.got) != 4 {
		t.Fatalf("calls: %+v", f.got)
	}
	if p := f.got[0].(mgmt.AuthLoginStartParams); p.Headless == nil || !*p.Headless || p.ScopeKind != mgmt.ScopeWorkspace {
		t.Errorf("login_start params: %+v", p)
	}
	if p := f.got[1].(mgmt.AuthLoginCompleteParams); p.CallbackURL != "http://127.0.0.1:1/callback?code=c&state=s" {
		t.Errorf("login_complete params: %+v", p)
	}
	if p := f.got[2].(mgmt.AuthLogoutParams); p.Revoke == nil || !*p.Revoke {
		t.Errorf("logout params: %+v", p)
	}

	plain, _ := serveStack(t, mgmttest.NewSeeded(), mgmt.Options{})
	_, answer := post(t, plain, ownerToken, `{"jsonrpc":"2.0","id":1,"method":"mcp/auth/status","params":{"name":"a"}}`)
	if code, _ := errorOf(t, answer); code != mgmt.CodeMethodNotFound {
		t.Fatalf("a manager without sign-in: %s", answer)
	}
}
