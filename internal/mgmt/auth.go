package mgmt

import (
	"context"
	"encoding/json"
)

// toolgate's extension of the management protocol: a remote server's OAuth sign-in
// (docs/management.md, "Signing in to remote servers"; docs/upstream-auth.md), so a
// desktop client can show the authorization URL and finish the login. The login runs
// in the process that serves the protocol (the daemon), whose loopback listener takes
// the browser's redirect.
const (
	MethodAuthStatus        = "mcp/auth/status"
	MethodAuthLoginStart    = "mcp/auth/login_start"
	MethodAuthLoginComplete = "mcp/auth/login_complete"
	MethodAuthLogout        = "mcp/auth/logout"
)

// AuthManager is the sign-in methods. A Manager that does not implement it answers
// them method_not_found.
type AuthManager interface {
	AuthStatus(ctx context.Context, c Caller, p AuthParams) (*AuthStatusResult, error)
	AuthLoginStart(ctx context.Context, c Caller, p AuthLoginStartParams) (*AuthLoginStartResult, error)
	AuthLoginComplete(ctx context.Context, c Caller, p AuthLoginCompleteParams) (*AuthStatusResult, error)
	AuthLogout(ctx context.Context, c Caller, p AuthLogoutParams) (*AuthStatusResult, error)
}

// AuthParams name the server (mcp/auth/status).
type AuthParams struct {
	ServerRef
}

// AuthLoginStartParams start a login. Headless makes the serving process follow the
// authorization server's immediate redirects itself, with no browser (tests,
// automation); an authorization server that shows a page then fails the login.
type AuthLoginStartParams struct {
	ServerRef
	Headless *bool `json:"headless,omitempty"`
}

// AuthLoginCompleteParams finish the login mcp/auth/login_start began. Without
// CallbackURL the answer waits for the browser's redirect to the loopback listener
// (at most until the login expires); with it (the URL the browser was sent to, pasted
// by a person whose browser could not reach the listener) the code is taken from it.
type AuthLoginCompleteParams struct {
	ServerRef
	CallbackURL string `json:"callback_url,omitempty"`
}

// AuthLogoutParams: Revoke asks the authorization server to revoke the tokens too.
type AuthLogoutParams struct {
	ServerRef
	Revoke *bool `json:"revoke,omitempty"`
}

// AuthStatusResult is a server's sign-in: upstreamauth.Status as JSON (state,
// reason and detail when a sign-in is required, issuer, client_id, scopes,
// expires_at, refreshable, login_pending; never a secret).
type AuthStatusResult struct {
	Auth json.RawMessage `json:"auth"`
}

// AuthLoginStartResult is the login to finish: open URL in a browser; the
// authorization server sends it back to RedirectURI (a loopback listener) until
// ExpiresAt (Unix seconds).
type AuthLoginStartResult struct {
	Server      string `json:"server"`
	URL         string `json:"url"`
	RedirectURI string `json:"redirect_uri"`
	ExpiresAt   int64  `json:"expires_at"`
}

func decodeAuth(method string, raw json.RawMessage) (p AuthParams, err error) {
	return p, readParams(method, raw, refParams(&p.ServerRef)...)
}

func decodeAuthStart(raw json.RawMessage) (p AuthLoginStartParams, err error) {
	ps := append(refParams(&p.ServerRef), boolParam("headless", &p.Headless))
	return p, readParams(MethodAuthLoginStart, raw, ps...)
}

func decodeAuthComplete(raw json.RawMessage) (p AuthLoginCompleteParams, err error) {
	ps := append(refParams(&p.ServerRef), strParam("callback_url", &p.CallbackURL))
	return p, readParams(MethodAuthLoginComplete, raw, ps...)
}

func decodeAuthLogout(raw json.RawMessage) (p AuthLogoutParams, err error) {
	ps := append(refParams(&p.ServerRef), boolParam("revoke", &p.Revoke))
	return p, readParams(MethodAuthLogout, raw, ps...)
}

// runAuth dispatches the sign-in methods; ok is false for any other method.
func (d *dispatcher) runAuth(ctx context.Context, who Caller, method string, raw json.RawMessage) (res any, ok bool, err error) {
	am, _ := d.m.(AuthManager)
	switch method {
	case MethodAuthStatus, MethodAuthLoginStart, MethodAuthLoginComplete, MethodAuthLogout:
		if am == nil {
			return nil, true, Errorf(CodeMethodNotFound, "method not found: %q", method)
		}
	default:
		return nil, false, nil
	}
	switch method {
	case MethodAuthStatus:
		p, err := decodeAuth(method, raw)
		if err != nil {
			return nil, true, err
		}
		res, err = am.AuthStatus(ctx, who, p)
		return res, true, err
	case MethodAuthLoginStart:
		p, err := decodeAuthStart(raw)
		if err != nil {
			return nil, true, err
		}
		res, err = am.AuthLoginStart(ctx, who, p)
		return res, true, err
	case MethodAuthLoginComplete:
		p, err := decodeAuthComplete(raw)
		if err != nil {
			return nil, true, err
		}
		res, err = am.AuthLoginComplete(ctx, who, p)
		return res, true, err
	}
	p, err := decodeAuthLogout(raw)
	if err != nil {
		return nil, true, err
	}
	res, err = am.AuthLogout(ctx, who, p)
	return res, true, err
}

// The checked Manager applies the same reference rules to the sign-in methods.

func (c checked) authManager() (AuthManager, error) {
	am, ok := c.m.(AuthManager)
	if !ok {
		return nil, Errorf(CodeMethodNotFound, "this manager has no sign-in methods")
	}
	return am, nil
}

func (c checked) AuthStatus(ctx context.Context, who Caller, p AuthParams) (*AuthStatusResult, error) {
	am, err := c.authManager()
	if err != nil {
		return nil, err
	}
	if p.ServerRef, err = checkRef(p.ServerRef); err != nil {
		return nil, err
	}
	r, err := am.AuthStatus(ctx, who, p)
	if err != nil || r == nil {
		return nil, resultErr(err)
	}
	return r, nil
}

func (c checked) AuthLoginStart(ctx context.Context, who Caller, p AuthLoginStartParams) (*AuthLoginStartResult, error) {
	am, err := c.authManager()
	if err != nil {
		return nil, err
	}
	if p.ServerRef, err = checkRef(p.ServerRef); err != nil {
		return nil, err
	}
	r, err := am.AuthLoginStart(ctx, who, p)
	if err != nil || r == nil {
		return nil, resultErr(err)
	}
	return r, nil
}

func (c checked) AuthLoginComplete(ctx context.Context, who Caller, p AuthLoginCompleteParams) (*AuthStatusResult, error) {
	am, err := c.authManager()
	if err != nil {
		return nil, err
	}
	if p.ServerRef, err = checkRef(p.ServerRef); err != nil {
		return nil, err
	}
	r, err := am.AuthLoginComplete(ctx, who, p)
	if err != nil || r == nil {
		return nil, resultErr(err)
	}
	return r, nil
}

func (c checked) AuthLogout(ctx context.Context, who Caller, p AuthLogoutParams) (*AuthStatusResult, error) {
	am, err := c.authManager()
	if err != nil {
		return nil, err
	}
	if p.ServerRef, err = checkRef(p.ServerRef); err != nil {
		return nil, err
	}
	r, err := am.AuthLogout(ctx, who, p)
	if err != nil || r == nil {
		return nil, resultErr(err)
	}
	return r, nil
}

// The Client calls them on the daemon.

func (c *Client) AuthStatus(ctx context.Context, _ Caller, p AuthParams) (*AuthStatusResult, error) {
	return call[AuthStatusResult](ctx, c, MethodAuthStatus, p)
}

func (c *Client) AuthLoginStart(ctx context.Context, _ Caller, p AuthLoginStartParams) (*AuthLoginStartResult, error) {
	return call[AuthLoginStartResult](ctx, c, MethodAuthLoginStart, p)
}

func (c *Client) AuthLoginComplete(ctx context.Context, _ Caller, p AuthLoginCompleteParams) (*AuthStatusResult, error) {
	return call[AuthStatusResult](ctx, c, MethodAuthLoginComplete, p)
}

func (c *Client) AuthLogout(ctx context.Context, _ Caller, p AuthLogoutParams) (*AuthStatusResult, error) {
	return call[AuthStatusResult](ctx, c, MethodAuthLogout, p)
}
