package app

import (
	"context"
	"crypto/subtle"

	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/policy"
)

// ManagementAuth is the management protocol's authenticator (mgmt.Authenticator):
// the owner token is the owner (principal DefaultPrincipal); an execution token
// (never a bridge's) is its principal, an administrator only while it holds an allow
// grant on AdminToolID. The grant is decided by the policy as the store has it now
// (one version read when nothing changed), so revoking it takes effect at the next
// request. No install, policy or uninstall grants anything to anyone: only grants do.
func (a *App) ManagementAuth(owner string) mgmt.Authenticator {
	verify := a.Authenticate("") // execution tokens only; the owner token is checked here
	return func(ctx context.Context, token string) (mgmt.Caller, bool, bool) {
		if owner != "" && subtle.ConstantTimeCompare([]byte(token), []byte(owner)) == 1 {
			return mgmt.Caller{Principal: DefaultPrincipal, Owner: true}, true, true
		}
		principal, ok := verify(token, token != "")
		if !ok {
			return mgmt.Caller{}, false, false
		}
		return mgmt.Caller{Principal: principal}, a.IsAdmin(ctx, principal), true
	}
}

// IsAdmin reports whether principal holds an allow grant on AdminToolID (and no deny)
// in the current policy. A store that cannot be read answers false: fail closed.
func (a *App) IsAdmin(ctx context.Context, principal string) bool {
	if err := a.refresh(ctx); err != nil {
		a.log.Warn("re-reading grants to decide an administrator", "err", err)
		return false
	}
	set := a.polSet.Load()
	if set == nil {
		return false
	}
	return set.Decide(policy.Request{Principal: principal, Tool: AdminToolID, Action: "execute"}).Allowed
}
