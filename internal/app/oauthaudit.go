package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/upstreamauth"
)

// The audit of a remote server's sign-in (docs/audit.md, "Sign-ins"): each
// token-related request upstreamauth reports (upstreamauth.Config.OnRequest) is one
// event — the authorization response, the code exchange, a refresh, a client
// credentials grant, a registration, a revocation — with its endpoint and outcome,
// never a token, a code or a secret.

// oauthAuditTimeout bounds one event's write: the request it reports has ended, and
// the sign-in waits for it.
const oauthAuditTimeout = 5 * time.Second

// oauthEvent is the audit event of one request of server's sign-in.
func oauthEvent(e upstreamauth.RequestEvent) audit.Event {
	var b [10]byte
	_, _ = rand.Read(b[:])
	ev := audit.Event{CallID: "oauth-" + hex.EncodeToString(b[:]), Principal: trustPrincipal, Transport: trustTransport,
		Tool: e.Server + ".*", Action: "oauth." + e.Kind, Resource: "mcp:" + e.Server, Decision: audit.Allowed}
	msg := e.Kind + " " + e.Endpoint + ": " + e.Outcome
	switch e.Outcome {
	case upstreamauth.OutcomeRefused:
		ev.Decision, ev.Code = audit.Denied, string(kernel.CodeOAuthRefused)
	case upstreamauth.OutcomeFailed:
		ev.Decision, ev.Code = audit.Failed, string(kernel.CodeOAuthFailed)
	}
	if e.Code != "" {
		msg += " (" + e.Code + ")"
	}
	ev.Message = clipText(msg, 1000)
	return ev
}

// auditOAuth writes the event of one request of a sign-in. A write that fails is
// logged: the request already happened, and failing the sign-in would not undo it.
func (a *App) auditOAuth(e upstreamauth.RequestEvent) {
	ev := oauthEvent(e)
	ctx, cancel := context.WithTimeout(context.Background(), oauthAuditTimeout)
	defer cancel()
	if err := a.st.AppendAudit(ctx, &ev); err != nil {
		a.log.Error("oauth: writing an audit event", "server", e.Server, "kind", e.Kind, "err", err)
	}
}
