package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/rpcwire"
	"github.com/toolgate/toolgate/internal/toolpin"
	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstreamtools"
)

// What a turn relays beside tools: the resources, resource templates and prompts of
// the upstream servers it may see, their completions and logging (docs/kernel.md,
// "Upstream resources and prompts"). Items are published from the host's catalogue,
// each as the upstream wrote it, filtered by the grants (kernel.Turn.MayRead); every
// read, get, subscription and completion is decided and audited
// (kernel.Turn.AuthorizeRead) and then forwarded to its server with the client's
// params as they were, its answer's bytes returned unchanged.

// JSON-RPC codes of a relayed request's refusals.
const (
	// codeResourceNotFound is MCP's "resource not found": an unknown URI, or one
	// the caller may not read (the two are not told apart).
	codeResourceNotFound = -32002
)

// relayCatalogTimeout bounds the catalogue reads of RelayCapabilities, which has no
// caller's context (initialize, server/discover): a host that does not answer
// (a relay whose host hangs) must not hold a handshake forever.
const relayCatalogTimeout = 5 * time.Second

// relayServer is one upstream server as a turn relays it: its catalogue and what
// of it the turn may see.
type relayServer struct {
	name      string
	caps      json.RawMessage // the upstream's server capabilities
	resources []json.RawMessage
	templates []json.RawMessage
	prompts   []json.RawMessage
	tools     bool // the turn publishes some of its tools
	// cat is the whole catalogue: reads are routed by it, so that one of an item the
	// turn may not see is decided (and audited) like any other.
	cat host.Catalog
}

// visible reports whether the turn sees anything of s.
func (s relayServer) visible() bool {
	return s.tools || len(s.resources)+len(s.templates)+len(s.prompts) > 0
}

// relayServers returns the upstream servers SyncUpstream published, in name order,
// each with the items of its catalogue the turn may see.
func (t turn) relayServers(ctx context.Context) []relayServer {
	return t.relayServersOf(t.a.catalogs(ctx))
}

// serverCatalog is one published upstream server's catalogue.
type serverCatalog struct {
	name string
	cat  host.Catalog
}

// catalogs reads the catalogues of the upstream servers SyncUpstream published, in
// name order.
func (a *App) catalogs(ctx context.Context) []serverCatalog {
	up := a.ut.up
	if up == nil {
		return nil
	}
	a.ut.mu.Lock()
	names := make([]string, 0, len(a.ut.servers))
	for n := range a.ut.servers {
		names = append(names, n)
	}
	a.ut.mu.Unlock()
	slices.Sort(names)
	out := make([]serverCatalog, 0, len(names))
	for _, n := range names {
		cat, ok, err := up.Catalog(ctx, n)
		if err != nil || !ok {
			continue
		}
		out = append(out, serverCatalog{name: n, cat: cat})
	}
	return out
}

// relayServersOf is each of cats with the items the turn may see.
func (t turn) relayServersOf(cats []serverCatalog) []relayServer {
	var out []relayServer
	for _, sc := range cats {
		n, cat := sc.name, sc.cat
		s := relayServer{name: n, caps: cat.Info.Capabilities, tools: t.Turn.Publishes(n), cat: cat}
		// Only what the pins publish (docs/trust.md, "Resources and prompts").
		g := t.a.trustFor(n).items.Load()
		for _, r := range cat.Resources {
			if uri, ok := stringMember(r, "uri"); ok && g.publishes(toolpin.KindResource, uri, r) && t.Turn.MayRead(resourceAccess(n, uri, "")) {
				s.resources = append(s.resources, r)
			}
		}
		for _, r := range cat.ResourceTemplates {
			if tpl, ok := stringMember(r, "uriTemplate"); ok && g.publishes(toolpin.KindTemplate, tpl, r) && t.Turn.MayRead(resourceAccess(n, tpl, "")) {
				s.templates = append(s.templates, r)
			}
		}
		for _, p := range cat.Prompts {
			if name, ok := stringMember(p, "name"); ok && g.publishes(toolpin.KindPrompt, name, p) && t.Turn.MayRead(promptAccess(n, name, "")) {
				s.prompts = append(s.prompts, p)
			}
		}
		out = append(out, s)
	}
	return out
}

func resourceAccess(server, uri, what string) kernel.ItemAccess {
	return kernel.ItemAccess{ID: kernel.ResourcesID(server), Resource: kernel.ResourceOf(server, uri), What: what}
}

func promptAccess(server, name, what string) kernel.ItemAccess {
	return kernel.ItemAccess{ID: kernel.PromptsID(server), Resource: kernel.PromptOf(server, name), What: what}
}

// RelayCapabilities implements mcpserver.Relay: resources, prompts, completions and
// logging, each only when some server the turn sees has something behind it.
func (t turn) RelayCapabilities(modern bool) json.RawMessage {
	var res, prompts, completions, logging, subscribe bool
	ctx, cancel := context.WithTimeout(context.Background(), relayCatalogTimeout)
	defer cancel()
	for _, s := range t.relayServers(ctx) {
		if !s.visible() {
			continue
		}
		items := len(s.resources)+len(s.templates) > 0
		res = res || items
		prompts = prompts || len(s.prompts) > 0
		if items && !modern {
			if rc, ok := rpcwire.Member(s.caps, "resources"); ok {
				v, _ := rpcwire.Member(rc, "subscribe")
				subscribe = subscribe || string(v) == "true"
			}
		}
		if hasMember(s.caps, "completions") && (len(s.templates) > 0 || len(s.prompts) > 0) {
			completions = true
		}
		logging = logging || hasMember(s.caps, "logging")
	}
	var b bytes.Buffer
	add := func(on bool, member string) {
		if !on {
			return
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(member)
	}
	add(completions, `"completions":{}`)
	add(logging, `"logging":{}`)
	add(prompts, `"prompts":{"listChanged":false}`)
	add(res, fmt.Sprintf(`"resources":{"listChanged":false,"subscribe":%t}`, subscribe))
	if b.Len() == 0 {
		return nil
	}
	return json.RawMessage("{" + b.String() + "}")
}

// Relay implements mcpserver.Relay.
func (t turn) Relay(ctx context.Context, method string, params json.RawMessage, modern bool, peer mcpspec.Peer) (json.RawMessage, error) {
	if err := t.a.refresh(ctx); err != nil {
		t.a.log.WarnContext(ctx, "re-reading grants before a relayed request", "err", err)
	}
	servers := t.relayServers(ctx)
	fwd := params
	if modern {
		fwd = withoutMember(params, "_meta")
	}
	switch method {
	case mcpspec.MethodResourcesList:
		return listOf("resources", servers, func(s relayServer) []json.RawMessage { return s.resources })
	case mcpspec.MethodResourcesTemplatesList:
		return listOf("resourceTemplates", servers, func(s relayServer) []json.RawMessage { return s.templates })
	case mcpspec.MethodPromptsList:
		return listOf("prompts", servers, func(s relayServer) []json.RawMessage { return s.prompts })
	case mcpspec.MethodResourcesRead, mcpspec.MethodResourcesSubscribe, mcpspec.MethodResourcesUnsubscribe:
		uri, ok := stringMember(params, "uri")
		if !ok {
			return nil, rpcwire.InvalidParams(method + " needs a uri")
		}
		s, found := resourceServer(servers, uri)
		if !found {
			return nil, &jsonrpc.Error{Code: codeResourceNotFound, Message: "resource not found: " + uri}
		}
		if err := t.authorizeItem(ctx, resourceAccess(s, uri, method), &jsonrpc.Error{Code: codeResourceNotFound, Message: "resource not found: " + uri},
			func() error { return t.a.admitResource(servers, s, uri) }); err != nil {
			return nil, err
		}
		switch {
		case modern && method == mcpspec.MethodResourcesRead:
			if res, ok, err := t.statelessRound(ctx, s, method, "resource:"+uri, nil, params, peer); ok {
				return res, err
			}
		case method == mcpspec.MethodResourcesSubscribe:
			return t.subscribe(ctx, s, uri, fwd, peer)
		case method == mcpspec.MethodResourcesUnsubscribe:
			return t.unsubscribe(ctx, s, uri, fwd, peer)
		}
		return t.forward(ctx, s, method, fwd, peer)
	case mcpspec.MethodPromptsGet:
		name, ok := stringMember(params, "name")
		if !ok {
			return nil, rpcwire.InvalidParams("prompts/get needs a name")
		}
		s, found := promptServer(servers, name)
		if !found {
			return nil, rpcwire.InvalidParams("unknown prompt: " + name)
		}
		if err := t.authorizeItem(ctx, promptAccess(s, name, method), rpcwire.InvalidParams("unknown prompt: "+name),
			func() error { return t.a.admitItem(s, toolpin.KindPrompt, name, promptItem(servers, s, name)) }); err != nil {
			return nil, err
		}
		if modern {
			args, _ := rpcwire.Member(params, "arguments")
			if res, ok, err := t.statelessRound(ctx, s, method, "prompt:"+name, args, params, peer); ok {
				return res, err
			}
		}
		return t.forward(ctx, s, method, fwd, peer)
	case mcpspec.MethodCompletionComplete:
		ref, _ := rpcwire.Member(params, "ref")
		kind, _ := stringMember(ref, "type")
		var s string
		var found bool
		var acc kernel.ItemAccess
		switch kind {
		case "ref/prompt":
			name, _ := stringMember(ref, "name")
			s, found = promptServer(servers, name)
			acc = promptAccess(s, name, method)
		case "ref/resource":
			uri, _ := stringMember(ref, "uri")
			s, found = templateServer(servers, uri)
			acc = resourceAccess(s, uri, method)
		}
		if !found {
			return nil, rpcwire.InvalidParams("completion/complete: unknown reference")
		}
		admit := func() error {
			if kind == "ref/prompt" {
				name, _ := stringMember(ref, "name")
				return t.a.admitItem(s, toolpin.KindPrompt, name, promptItem(servers, s, name))
			}
			if t.a.trustFor(s).items.Load().heldTemplates {
				return quarantined(s, toolpin.KindTemplate, "template:*", "a resource template of the server is held")
			}
			return nil
		}
		if err := t.authorizeItem(ctx, acc, rpcwire.InvalidParams("completion/complete: unknown reference"), admit); err != nil {
			return nil, err
		}
		return t.forward(ctx, s, method, fwd, peer)
	case mcpspec.MethodLoggingSetLevel:
		// A preference of the client's, sent to every server it sees that logs.
		for _, s := range servers {
			if s.visible() && hasMember(s.caps, "logging") {
				if _, err := t.forward(ctx, s.name, method, fwd, peer); err != nil {
					return nil, err
				}
			}
		}
		return json.RawMessage(`{}`), nil
	}
	return nil, rpcwire.MethodNotFound(method)
}

// forward sends one request to server on the turn's session key; progress the
// upstream reports reaches the client with its own token.
func (t turn) forward(ctx context.Context, server, method string, params json.RawMessage, peer mcpspec.Peer) (json.RawMessage, error) {
	opts := host.CallOptions{SessionKey: t.ID()}
	upstreamtools.ToClient(ctx, peer, &opts)
	if n, ok := peer.(mcpspec.Notifier); ok {
		if meta, _ := rpcwire.Member(params, "_meta"); meta != nil {
			if _, has := rpcwire.Member(meta, "progressToken"); has {
				opts.Progress = func(p json.RawMessage) { n.Notify(context.WithoutCancel(ctx), mcpspec.NotificationProgress, p) }
			}
		}
	}
	res, err := turnCaller{t.a}.Call(ctx, server, method, params, opts)
	if err == nil {
		return res, nil
	}
	var re *upstream.RPCError
	if errors.As(err, &re) {
		return nil, &jsonrpc.Error{Code: re.Code, Message: re.Message, Data: re.Data}
	}
	var se *host.ServerError
	if errors.As(err, &se) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("upstream server %s is unavailable", server)}
	}
	return nil, err
}

// statelessRound relays a 2026-07-28 prompts/get or resources/read on the server's
// stateless connection, its input rounds included (upstreamtools.Exchange): ok is
// false when the server does not speak that revision (the legacy connection answers
// instead, with no input round).
func (t turn) statelessRound(ctx context.Context, server, method, subject string, args, params json.RawMessage, peer mcpspec.Peer) (json.RawMessage, bool, error) {
	if peer == nil {
		peer = mcpspec.NoPeer{}
	}
	x := &upstreamtools.Exchange{Server: server, Principal: t.Principal(), TurnID: t.ID(), Subject: subject,
		Args: args, Params: params, Peer: peer, Policy: inputPolicy{t.a}}
	r, ok := x.Round(ctx, turnCaller{t.a}, method)
	switch {
	case !ok:
		return nil, false, nil
	case r.ProtocolError != nil:
		return nil, true, &jsonrpc.Error{Code: r.ProtocolError.Code, Message: r.ProtocolError.Message, Data: r.ProtocolError.Data}
	case r.InputRequests != nil:
		var b bytes.Buffer
		b.WriteString(`{"resultType":"input_required","inputRequests":`)
		b.Write(r.InputRequests)
		b.WriteString(`,"requestState":`)
		b.Write(r.RequestState)
		b.WriteByte('}')
		return b.Bytes(), true, nil
	case r.Err != nil:
		var ke *kernel.Error
		if errors.As(r.Err, &ke) {
			return nil, true, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: ke.Message}
		}
		var se *host.ServerError
		if errors.As(r.Err, &se) {
			return nil, true, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("upstream server %s is unavailable", server)}
		}
		return nil, true, r.Err
	}
	return r.Result, true, nil
}

// authorizeItem decides a relayed request for one item. A caller the grants let read it
// is refused tool_quarantined while the item's definition is held (admit): nothing is
// audited as allowed for a request that is not sent, and the hold itself was audited
// when it was raised. Any other caller is decided and audited by AuthorizeRead, and
// learns nothing of a hold (the item is unknown to it).
func (t turn) authorizeItem(ctx context.Context, acc kernel.ItemAccess, notFound *jsonrpc.Error, admit func() error) error {
	if t.Turn.MayRead(acc) {
		if err := admit(); err != nil {
			return err
		}
	}
	if ke := t.Turn.AuthorizeRead(ctx, acc); ke != nil {
		return refusal(ke, notFound)
	}
	return nil
}

// refusal is the error a refused read answers: audit_unavailable as an internal
// error, anything else as notFound (an item the caller may not see is unknown to it).
func refusal(ke *kernel.Error, notFound *jsonrpc.Error) error {
	if ke.Code == kernel.CodeAuditUnavailable {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: ke.Message}
	}
	return notFound
}

// listOf answers a list method with the items of every server, in server order.
func listOf(member string, servers []relayServer, items func(relayServer) []json.RawMessage) (json.RawMessage, error) {
	// Written by hand: encoding/json would compact the items and escape <, > and &.
	var b bytes.Buffer
	b.WriteString(`{"` + member + `":[`)
	n := 0
	for _, s := range servers {
		for _, it := range items(s) {
			if n > 0 {
				b.WriteByte(',')
			}
			b.Write(it)
			n++
		}
	}
	b.WriteString("]}")
	return b.Bytes(), nil
}

// admitResource is nil when a read of uri on server s may be relayed: the resource
// listing it is published, or, for a URI no resource of s lists (one a template
// makes), no template of s is held.
func (a *App) admitResource(servers []relayServer, s, uri string) error {
	for _, rs := range servers {
		if rs.name != s {
			continue
		}
		for _, r := range rs.cat.Resources {
			if u, _ := stringMember(r, "uri"); u == uri {
				return a.admitItem(s, toolpin.KindResource, uri, r)
			}
		}
	}
	if a.trustFor(s).items.Load().heldTemplates {
		return quarantined(s, toolpin.KindTemplate, "template:*", "a resource template of the server is held, and which one this URI comes from cannot be told")
	}
	return nil
}

// resourceServer is the server a URI belongs to: the first listing it, else the only
// server with resource templates.
func resourceServer(servers []relayServer, uri string) (string, bool) {
	for _, s := range servers {
		for _, r := range s.cat.Resources {
			if u, _ := stringMember(r, "uri"); u == uri {
				return s.name, true
			}
		}
	}
	return templateServer(servers, uri)
}

// templateServer is the only server with resource templates.
func templateServer(servers []relayServer, _ string) (string, bool) {
	var name string
	n := 0
	for _, s := range servers {
		if len(s.cat.ResourceTemplates) > 0 {
			name, n = s.name, n+1
		}
	}
	return name, n == 1
}

// promptItem is the definition server s lists for the prompt name, or nil.
func promptItem(servers []relayServer, s, name string) json.RawMessage {
	for _, rs := range servers {
		if rs.name != s {
			continue
		}
		for _, p := range rs.cat.Prompts {
			if n, _ := stringMember(p, "name"); n == name {
				return p
			}
		}
	}
	return nil
}

func promptServer(servers []relayServer, name string) (string, bool) {
	for _, s := range servers {
		for _, p := range s.cat.Prompts {
			if n, _ := stringMember(p, "name"); n == name {
				return s.name, true
			}
		}
	}
	return "", false
}

func stringMember(obj json.RawMessage, name string) (string, bool) {
	v, ok := rpcwire.Member(obj, name)
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

func hasMember(obj json.RawMessage, name string) bool {
	v, ok := rpcwire.Member(obj, name)
	return ok && string(v) != "null"
}

// withoutMember is obj without its member name, every other member's bytes kept (a
// 2026-07-28 request's _meta names a revision the upstream's connection does not
// speak).
func withoutMember(obj json.RawMessage, name string) json.RawMessage {
	if _, ok := rpcwire.Member(obj, name); !ok {
		return obj
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for k, v := range rpcwire.Members(obj) {
		if k == name {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes()
}
