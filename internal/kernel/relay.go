package kernel

import (
	"context"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/policy"
)

// What an upstream server offers beside tools — resources, resource templates and
// prompts — is authorized like its tools (docs/kernel.md, "Upstream resources and
// prompts"): one policy id per kind in the server's namespace, action read, and a
// resource naming the item, so a grant can cover a whole server (`github.*`), one kind
// of item (`github.resources`) or one item (its resource scope).

// ItemAccess names one access to an upstream server's resource or prompt.
type ItemAccess struct {
	// ID is the policy id: ResourcesID or PromptsID of the server.
	ID string
	// Resource is ResourceOf or PromptOf the item.
	Resource string
	// What describes the access in the audit event ("resources/read", "prompts/get").
	What string
}

// ResourcesID is the policy id the resources and resource templates of server are
// authorized under.
func ResourcesID(server string) string { return server + ".resources" }

// PromptsID is the policy id the prompts of server are authorized under.
func PromptsID(server string) string { return server + ".prompts" }

// ResourceOf is the policy resource of one of server's resources (or a template's
// URI template): mcp:<server>/<uri>.
func ResourceOf(server, uri string) string { return "mcp:" + server + "/" + uri }

// PromptOf is the policy resource of one of server's prompts: mcp:<server>/prompt/<name>.
func PromptOf(server, name string) string { return "mcp:" + server + "/prompt/" + name }

// MayRead reports whether the turn publishes the item: its namespace is enabled and,
// when explicit-only, selected by the turn; the turn's capabilities cover its id; and
// the grants (the turn's policy and the current one) allow reading it. Nothing is
// audited: listing publishes, reading decides (AuthorizeRead).
func (t *Turn) MayRead(acc ItemAccess) bool {
	_, ok := t.decideRead(acc)
	return ok
}

// AuthorizeRead decides one read of an item (resources/read, prompts/get, a
// subscription, a completion) and writes its audit event: allowed, or denied with the
// code the caller gets. A nil error allows it. An event that cannot be written refuses
// the read (audit_unavailable), as for a tool call.
func (t *Turn) AuthorizeRead(ctx context.Context, acc ItemAccess) *Error {
	c := &callState{t: t, start: time.Now(), ev: audit.Event{
		CallID: newID("call-"), TurnID: t.id, Principal: t.principal, Transport: t.transport,
		Tool: acc.ID, Action: string(ActionRead),
	}}
	res, err := policy.NormalizeResource(acc.Resource)
	if err != nil {
		ke := Failed(CodeInvalidArguments, "%v", err)
		c.refuse(ctx, ke)
		return ke
	}
	c.ev.Resource = res
	acc.Resource = res
	if t.closed.Load() {
		ke := Denied(CodeTurnClosed, "the turn is over; open a new one")
		c.refuse(ctx, ke)
		return ke
	}
	d, ok := t.decideRead(acc)
	c.ev.GrantID = d.GrantID()
	if !ok {
		var ke *Error
		switch d.Reason {
		case policy.ReasonDenied:
			ke = Denied(CodeExplicitDeny, "a deny grant refuses %s read on %s", acc.ID, describe(res))
		case policy.ReasonAllowed:
			// A gate before the grants (namespace, selection, capability).
			ke = Denied(CodeToolUnavailable, "%s is not available in this turn", acc.ID)
		default:
			ke = Denied(CodeNoMatchingGrant, "no grant allows %s read on %s", acc.ID, describe(res))
		}
		if r, _ := c.refuse(ctx, ke); r != nil && c.t.failed.Load() {
			return Failed(CodeAuditUnavailable, "the audit log could not record this read, so it was not done").WithRetryable(true)
		}
		return ke
	}
	c.ev.Decision = audit.Allowed
	c.ev.Message = clip(acc.What, 500)
	if err := c.append(ctx); err != nil {
		c.auditUnavailable(ctx, err)
		return Failed(CodeAuditUnavailable, "the audit log could not record this read, so it was not done").WithRetryable(true)
	}
	return nil
}

// decideRead applies the gates MayRead names; d is the grants' decision (Reason
// ReasonAllowed with ok false when a gate before them refused).
func (t *Turn) decideRead(acc ItemAccess) (d policy.Decision, ok bool) {
	ns, _, _ := strings.Cut(acc.ID, ".")
	allowed := policy.Decision{Reason: policy.ReasonAllowed}
	if on, set := t.ns[ns]; set && !on {
		return allowed, false
	}
	if p, known := t.nspol[ns]; !known || p.Disabled {
		return allowed, false
	} else if p.ExplicitOnly && !t.selectedNamespace(ns) {
		return allowed, false
	}
	if !t.caps.Allows(acc.ID, string(ActionRead)) && !t.selectedNamespace(ns) {
		return allowed, false
	}
	req := policy.Request{Principal: t.principal, Tool: acc.ID, Action: string(ActionRead), Resource: acc.Resource}
	d = t.policy.Decide(req)
	if cur := t.k.policy.Load(); cur != t.policy && d.Reason == policy.ReasonAllowed {
		if now := cur.Decide(req); now.Reason != policy.ReasonAllowed {
			d = now
		}
	}
	return d, d.Reason == policy.ReasonAllowed
}

// selectedNamespace reports whether the turn's selections brought in a tool of ns.
func (t *Turn) selectedNamespace(ns string) bool {
	for id := range t.selected {
		if strings.HasPrefix(id, ns+".") {
			return true
		}
	}
	return false
}

// Publishes reports whether the turn's catalogue holds a tool of namespace ns.
func (t *Turn) Publishes(ns string) bool {
	for _, e := range t.byName {
		if e.ns == ns {
			return true
		}
	}
	return false
}
