package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstreamtools"
)

// Requests from servers (docs/trust.md, "Requests from servers"): an upstream may ask
// the client for a model completion (sampling/createMessage), to ask the user
// (elicitation/create) or for its roots (roots/list). Each is authorized like a tool
// call, for the principal whose call is in flight on that connection: a grant of the
// request's tool id, action execute, on resource mcp:<server>. Allowed, it reaches
// that caller's client labelled with the server (_meta "toolgate/source"); either way
// it is audited.

// The tool ids a grant names to let a server make each kind of request.
const (
	RequestSampling    = "mcp.request.sampling"
	RequestElicitation = "mcp.request.elicitation"
	RequestRoots       = "mcp.request.roots"
)

// serverRequestTools maps each request method a server may make to its tool id.
var serverRequestTools = map[string]string{
	mcpspec.MethodElicitationCreate:     RequestElicitation,
	mcpspec.MethodSamplingCreateMessage: RequestSampling,
	mcpspec.MethodRootsList:             RequestRoots,
}

// reservedServerName is the namespace of the request tool ids: no upstream server may
// take it, or a grant on its tools would let it make requests.
const reservedServerName = "mcp"

// RefusedRequestCode is the JSON-RPC error code of a server request toolgate refused
// (MCP's code for a request the client's user rejected).
const RefusedRequestCode = -1

// inflight records the forwarded calls in flight per server, so that a request the
// server makes can be attributed to the one caller it can be for.
type inflight struct {
	mu    sync.Mutex // guards calls; never held across I/O
	next  uint64
	calls map[string]map[uint64]upstreamtools.Origin
}

// track records o's call on server until the returned func is called.
func (f *inflight) track(server string, o upstreamtools.Origin) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]map[uint64]upstreamtools.Origin{}
	}
	m := f.calls[server]
	if m == nil {
		m = map[uint64]upstreamtools.Origin{}
		f.calls[server] = m
	}
	f.next++
	id := f.next
	m[id] = o
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(m, id)
		if len(m) == 0 && f.calls[server] != nil && len(f.calls[server]) == 0 {
			delete(f.calls, server)
		}
	}
}

// errNoOrigin and errManyOrigins say why a request could not be attributed.
var (
	errNoOrigin    = errors.New("no call of this server is in flight: the request is no caller's")
	errManyOrigins = errors.New("calls of several turns are in flight on this shared connection, so the request cannot be attributed to one (install the server with isolation \"session\")")
)

// origin is the one caller a request of server on the connection of sessionKey ("":
// shared) can be for.
func (f *inflight) origin(server, sessionKey string) (upstreamtools.Origin, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var found *upstreamtools.Origin
	for _, o := range f.calls[server] {
		if sessionKey != "" && o.TurnID != sessionKey {
			continue
		}
		if found != nil && found.TurnID != o.TurnID {
			return upstreamtools.Origin{}, errManyOrigins
		}
		found = &o
	}
	if found == nil {
		return upstreamtools.Origin{}, errNoOrigin
	}
	return *found, nil
}

// UpstreamRequests is the upstream.RequestHandler of server's connection for caller
// session sessionKey ("" for a shared connection): what the dialer of upstream
// servers passes as upstream.Options.OnRequest. It answers ping, refuses methods it
// does not know (-32601), and decides sampling/createMessage, elicitation/create and
// roots/list as described above; a refusal is JSON-RPC error RefusedRequestCode.
func (a *App) UpstreamRequests(server, sessionKey string, deliver upstream.RequestHandler) upstream.RequestHandler {
	return func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		if method == "ping" {
			return json.RawMessage(`{}`), nil
		}
		tool, ok := serverRequestTools[method]
		if !ok {
			return nil, &upstream.RPCError{Code: -32601, Message: "method not found: " + method}
		}
		ev := audit.Event{CallID: trustEventID(), Transport: trustTransport, Tool: tool, Action: string(kernel.ActionExecute),
			Resource: "mcp:" + server}
		refuse := func(code kernel.Code, msg string) (json.RawMessage, error) {
			ev.Decision, ev.Code, ev.Message = audit.Denied, string(code), clipText(method+": "+msg, 1000)
			a.appendRequestEvent(ctx, &ev)
			return nil, &upstream.RPCError{Code: RefusedRequestCode, Message: "refused by toolgate: " + msg}
		}
		o, err := a.ut.calls.origin(server, sessionKey)
		if err != nil {
			ev.Principal = trustPrincipal
			return refuse(kernel.CodeNoMatchingGrant, err.Error())
		}
		ev.Principal, ev.TurnID = o.Principal, o.TurnID
		if err := a.refresh(ctx); err != nil {
			return refuse(kernel.CodeInternal, "the grants could not be read")
		}
		d, code, msg := a.decideServerRequest(server, o.Principal, method, tool)
		ev.GrantID = d.GrantID()
		if !d.Allowed {
			return refuse(code, msg)
		}
		labelled, err := labelRequest(params, server)
		if err != nil {
			return refuse(kernel.CodeInvalidArguments, err.Error())
		}
		ev.Decision, ev.Message = audit.Allowed, method
		if err := a.appendRequestEvent(ctx, &ev); err != nil {
			return nil, &upstream.RPCError{Code: RefusedRequestCode, Message: "refused by toolgate: the audit is unavailable"}
		}
		if deliver == nil && o.Peer == nil {
			return nil, &upstream.RPCError{Code: -32601, Message: "the client cannot receive requests"}
		}
		var res json.RawMessage
		if deliver != nil {
			// The host's route: the call in flight the request belongs to, which hands
			// it to its caller in the caller's revision (an input round for 2026-07-28).
			res, err = deliver(ctx, method, labelled)
		} else {
			res, err = o.Peer.Request(ctx, method, labelled)
		}
		if err != nil {
			fail := audit.Event{CallID: ev.CallID, TurnID: ev.TurnID, Principal: ev.Principal, Transport: ev.Transport, Tool: tool,
				Action: ev.Action, Resource: ev.Resource, Decision: audit.Failed, Code: string(kernel.CodeToolFailed),
				Message: clipText(method+": the client did not answer: "+err.Error(), 1000)}
			a.appendRequestEvent(ctx, &fail)
			var re *upstream.RPCError
			if errors.As(err, &re) {
				return nil, re
			}
			if errors.Is(err, mcpspec.ErrPeerUnsupported) {
				return nil, &upstream.RPCError{Code: -32601, Message: "the client cannot receive requests"}
			}
			return nil, err
		}
		return res, nil
	}
}

func (a *App) appendRequestEvent(ctx context.Context, ev *audit.Event) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), trustTimeout)
	defer cancel()
	ev.Time = time.Now().UTC()
	if err := a.st.AppendAudit(ctx, ev); err != nil {
		a.log.Error("auditing an upstream server's request", "tool", ev.Tool, "err", err)
		return err
	}
	return nil
}

// labelRequest adds _meta "toolgate/source": server to a request's params (a JSON
// object, or none), replacing any toolgate/… member the server wrote itself.
func labelRequest(params json.RawMessage, server string) (json.RawMessage, error) {
	obj := map[string]json.RawMessage{}
	if len(params) > 0 && string(params) != "null" {
		if err := json.Unmarshal(params, &obj); err != nil {
			return nil, fmt.Errorf("the request's params are not a JSON object")
		}
	}
	meta := map[string]json.RawMessage{}
	if m, ok := obj["_meta"]; ok {
		if err := json.Unmarshal(m, &meta); err != nil {
			return nil, fmt.Errorf("the request's _meta is not a JSON object")
		}
	}
	for k := range meta {
		if len(k) >= len("toolgate/") && k[:len("toolgate/")] == "toolgate/" {
			delete(meta, k)
		}
	}
	src, _ := json.Marshal(server)
	meta["toolgate/source"] = src
	mb, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	obj["_meta"] = mb
	return json.Marshal(obj)
}

// inputPolicy is upstreamtools.RequestPolicy over the same grants: what a server may
// ask a 2026-07-28 caller's client for in an input round (its inputRequests) is
// decided and audited as its requests mid-call are.
type inputPolicy struct{ a *App }

func (p inputPolicy) May(server, principal, method string) bool {
	tool, ok := serverRequestTools[method]
	if !ok {
		return false
	}
	d, _, _ := p.a.decideServerRequest(server, principal, method, tool)
	return d.Allowed
}

// decideServerRequest decides whether server may make method requests (tool, its
// request tool id) of principal's client; refused, with the code and message.
func (a *App) decideServerRequest(server, principal, method, tool string) (policy.Decision, kernel.Code, string) {
	d := a.k.Decide(policy.Request{Principal: principal, Tool: tool, Action: string(kernel.ActionExecute), Resource: "mcp:" + server})
	if d.Allowed {
		return d, "", ""
	}
	code := kernel.CodeNoMatchingGrant
	if d.Reason == policy.ReasonDenied {
		code = kernel.CodeExplicitDeny
	}
	return d, code, fmt.Sprintf("no grant lets server %s make %s requests for principal %s (grant tool %s on mcp:%s)",
		server, method, principal, tool, server)
}

func (p inputPolicy) Record(ctx context.Context, server, principal, turnID, method string) error {
	tool, ok := serverRequestTools[method]
	if !ok {
		return kernel.Denied(kernel.CodeNoMatchingGrant, "server %s asked for %s, which is no input request", server, method)
	}
	ev := audit.Event{CallID: trustEventID(), Transport: trustTransport, Tool: tool, Action: string(kernel.ActionExecute),
		Resource: "mcp:" + server, Principal: principal, TurnID: turnID}
	d, code, msg := p.a.decideServerRequest(server, principal, method, tool)
	ev.GrantID = d.GrantID()
	if !d.Allowed {
		ev.Decision, ev.Code, ev.Message = audit.Denied, string(code), clipText(method+" (input round): "+msg, 1000)
		p.a.appendRequestEvent(ctx, &ev)
		return kernel.Denied(code, "%s", msg)
	}
	ev.Decision, ev.Message = audit.Allowed, method+" (input round)"
	if err := p.a.appendRequestEvent(ctx, &ev); err != nil {
		return kernel.Failed(kernel.CodeAuditUnavailable, "the audit log could not record the server's input request, so it was not passed on").WithRetryable(true)
	}
	return nil
}
