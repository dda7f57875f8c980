// Package upstreamtools turns an upstream server's catalogue, as the host keeps it,
// into kernel tools: one per raw MCP tool, under the server's namespace, published as
// the upstream wrote it (name replaced), authorized as execute on mcp:<server>, and
// run by forwarding the call to the upstream through the host, whose result bytes
// reach the caller unchanged (docs/kernel.md, "Upstream tools").
package upstreamtools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/hostrelay"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/names"
	"github.com/toolgate/toolgate/internal/rpcwire"
	"github.com/toolgate/toolgate/internal/upstream"
)

// Caller is what the tools need of the host: hostrelay.Upstreams (this process's host,
// or the relay to the process hosting the data directory's servers) satisfies it. A
// call with CallOptions.Stateless to a server without a stateless connection must
// fail with an error wrapping host.ErrNotStateless (the legacy path is taken then).
type Caller interface {
	Call(ctx context.Context, server, method string, params json.RawMessage, opts host.CallOptions) (json.RawMessage, error)
}

// Binding is one callable name bound to one raw MCP tool name (mcp/server/details'
// recent_bindings).
type Binding struct {
	ID      string `json:"callable"`
	RawName string `json:"raw_name"`
}

// Diagnostic is one thing Build noticed about one raw tool: renamed, refused, or
// published with a lenient schema.
type Diagnostic struct {
	RawName string `json:"raw_name"`
	ID      string `json:"callable,omitempty"`
	// Refused is true when the tool is not published.
	Refused bool   `json:"refused,omitempty"`
	Message string `json:"message"`
}

// Catalogue is one server's catalogue made into kernel tools.
type Catalogue struct {
	Server      string
	Version     uint64
	Digest      string
	Tools       []*kernel.Tool
	Bindings    []Binding
	Diagnostics []Diagnostic
}

// maxNameLen is the longest tool part of a canonical id (policy.ValidToolID).
const maxNameLen = 128

// Normalize maps a raw MCP tool name to the tool part of a canonical id: every
// character outside [A-Za-z0-9_.-] becomes '_', one per character; a name longer than
// 128 bytes is cut to 121 and given '_' and 6 hex digits of its SHA-256, so long names
// that share a beginning stay apart. It is deterministic and depends on the name alone.
func Normalize(raw string) string {
	var b strings.Builder
	for _, r := range raw {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) > maxNameLen {
		s = s[:maxNameLen-7] + "_" + shortHash(raw)
	}
	return s
}

func shortHash(raw string) string {
	h := sha256.Sum256([]byte(raw))
	return hex.EncodeToString(h[:3])
}

// Build makes cat's tools into kernel tools of namespace server, each calling up. The
// canonical id is <server>.<Normalize(raw)>. Raw names that meet after normalisation
// (the same id, or ids that read alike in some published form: names.Key) are told
// apart by a suffix of 6 hex digits of the raw name's SHA-256, given to every one but
// the first in byte order of the raw names, so the ids never depend on the order the
// server lists its tools in. reg, when set, holds every other published name: the
// server's previous names are freed, and a tool whose name in any form reads as
// another tool's is refused (the one already registered keeps it) with a diagnostic
// naming both. A list item that is not a tool (no string name, a name seen twice) is
// refused too. Build compiles nothing: the kernel does when the tools are registered
// (once per catalogue version).
func Build(server string, cat host.Catalog, up Caller, reg *names.Registry) *Catalogue {
	return BuildWith(server, cat, up, reg, Options{})
}

// Options are what the server's trust policy adds to Build (docs/trust.md).
type Options struct {
	// Trusted lets the upstream's annotations decide a call's action: readOnlyHint
	// true is read, anything else write. Untrusted (the default), every call is
	// execute whatever the annotations claim: hints are not authority.
	Trusted bool
	// Admit, when set, is asked before every call is sent with the tool's raw name; an
	// error refuses the call (a tool quarantined since the turn opened). It must not
	// block: it runs on every call.
	Admit func(raw string) error
	// Requests decides what the server may ask a 2026-07-28 caller's client for in an
	// input round (stateless.go); nil allows what the caller declared.
	Requests RequestPolicy
}

// BuildWith is Build under the server's trust options.
func BuildWith(server string, cat host.Catalog, up Caller, reg *names.Registry, opts Options) *Catalogue {
	out := &Catalogue{Server: server, Version: cat.Version, Digest: cat.Digest}
	type item struct {
		raw   string
		obj   json.RawMessage
		canon []byte // obj, compact (rpcwire.Limits.Canonical)
		base  string
	}
	var items []item
	seen := map[string]bool{}
	for _, obj := range cat.Tools {
		canon, err := rpcwire.Limits{MaxBytes: maxTool, MaxDepth: rpcwire.MaxDepth}.Canonical(obj)
		if err != nil || len(canon) == 0 || canon[0] != '{' {
			out.Diagnostics = append(out.Diagnostics, Diagnostic{Refused: true,
				Message: "a tools/list item that is not one JSON object read the same way by everyone (duplicate or case-variant members, over 1 MiB): left out"})
			continue
		}
		nv, ok := rpcwire.Member(canon, "name")
		var raw string
		if !ok || json.Unmarshal(nv, &raw) != nil || raw == "" {
			out.Diagnostics = append(out.Diagnostics, Diagnostic{Refused: true, Message: "a tools/list item without a string name: left out"})
			continue
		}
		if seen[raw] {
			out.Diagnostics = append(out.Diagnostics, Diagnostic{RawName: raw, Refused: true, Message: "the server lists this name twice: only the first is published"})
			continue
		}
		seen[raw] = true
		items = append(items, item{raw: raw, obj: obj, canon: canon, base: Normalize(raw)})
	}
	slices.SortFunc(items, func(a, b item) int { return strings.Compare(a.raw, b.raw) })
	taken := map[string]string{} // names.Key of the id → raw name holding it
	if reg != nil {
		reg.RemoveNamespace(server)
	}
	for _, it := range items {
		if len(out.Tools) == kernel.MaxCatalog {
			// No turn could publish more of one server's tools (kernel.MaxCatalog).
			out.Diagnostics = append(out.Diagnostics, Diagnostic{Refused: true,
				Message: fmt.Sprintf("the server lists %d tools: only the first %d (in byte order of their names) are published", len(items), kernel.MaxCatalog)})
			break
		}
		id := server + "." + it.base
		if other, clash := taken[names.Key(id)]; clash {
			renamed := server + "." + suffixed(it.base, it.raw)
			out.Diagnostics = append(out.Diagnostics, Diagnostic{RawName: it.raw, ID: renamed,
				Message: fmt.Sprintf("%q reads as %q once normalised (%s): published as %s", it.raw, other, id, renamed)})
			id = renamed
		}
		if other, clash := taken[names.Key(id)]; clash {
			out.Diagnostics = append(out.Diagnostics, Diagnostic{RawName: it.raw, Refused: true,
				Message: fmt.Sprintf("%q still reads as %q after renaming to %s: left out", it.raw, other, id)})
			continue
		}
		if reg != nil {
			if err := reg.Add(id); err != nil {
				out.Diagnostics = append(out.Diagnostics, Diagnostic{RawName: it.raw, ID: id, Refused: true, Message: err.Error()})
				continue
			}
		}
		taken[names.Key(id)] = it.raw
		out.Tools = append(out.Tools, newTool(server, id, it.raw, it.obj, it.canon, up, opts))
		out.Bindings = append(out.Bindings, Binding{ID: id, RawName: it.raw})
	}
	return out
}

// maxTool bounds one tool object, as the kernel does.
const maxTool = 1 << 20

func suffixed(base, raw string) string {
	if len(base) > maxNameLen-7 {
		base = base[:maxNameLen-7]
	}
	return base + "_" + shortHash(raw)
}

func newTool(server, id, raw string, obj json.RawMessage, canon []byte, up Caller, opts Options) *kernel.Tool {
	resource := "mcp:" + server
	// Annotations are the upstream's hints, published as it wrote them; they grant
	// nothing unless the owner marked the server trusted. Untrusted, every call is
	// execute on the server.
	action := kernel.ActionExecute
	if opts.Trusted {
		action = AnnotatedAction(canon)
	}
	admit, requests := opts.Admit, opts.Requests
	return &kernel.Tool{
		ID:      id,
		RawName: raw,
		Raw:     obj,
		Source:  server,
		Access: func(map[string]any) (kernel.Access, error) {
			return kernel.Access{Action: action, Resource: resource}, nil
		},
		Run: func(ctx context.Context, c *kernel.Call) (*kernel.Output, error) {
			if admit != nil {
				if err := admit(raw); err != nil {
					return nil, err
				}
			}
			return call(ctx, up, server, raw, c, requests)
		},
	}
}

// AnnotatedAction is the action a trusted server's tool is called with: read when its
// annotations say readOnlyHint true, write otherwise (a tool that does not say it only
// reads may change something, whatever its other hints claim). Anything unreadable is
// write. obj is the tool object in compact form (rpcwire.Limits.Canonical).
func AnnotatedAction(obj []byte) kernel.Action {
	ann, ok := rpcwire.Member(obj, "annotations")
	if !ok {
		return kernel.ActionWrite
	}
	ro, ok := rpcwire.Member(ann, "readOnlyHint")
	if ok && string(ro) == "true" {
		return kernel.ActionRead
	}
	return kernel.ActionWrite
}

// call forwards one call: tools/call with the raw name, the arguments' bytes as the
// kernel read them and, when the caller asked for progress, its progressToken, which
// the host's connection swaps for its own and restores on each notifications/progress
// it hands back; those go to the caller as they come.
func call(ctx context.Context, up Caller, server, raw string, c *kernel.Call, requests RequestPolicy) (*kernel.Output, error) {
	ctx = context.WithValue(ctx, originKey{}, Origin{Principal: c.Principal, TurnID: c.TurnID, Peer: c.Peer})
	if c.ProtocolVersion == mcpspec.ModernVersion {
		if len(c.RequestState) == 0 || isStatelessState(c.RequestState) {
			// The upstream's own rounds when it speaks 2026-07-28 (stateless.go).
			x := &Exchange{Server: server, Principal: c.Principal, TurnID: c.TurnID, Subject: c.Tool.ID,
				Args: c.Arguments, Params: modernParams(raw, c), Peer: c.Peer, Policy: requests}
			if r, ok := x.Round(ctx, up, "tools/call"); ok {
				return statelessOutput(r, server)
			}
		}
		return callModern(ctx, up, server, raw, c)
	}
	token := progressToken(c.Meta)
	params := Params(raw, c.Arguments, token)
	opts := host.CallOptions{SessionKey: c.TurnID}
	ToClient(ctx, c.Peer, &opts)
	if n, ok := c.Peer.(mcpspec.Notifier); ok && token != nil {
		opts.Progress = func(p json.RawMessage) {
			// Progress is best effort: a client that cannot take it loses nothing else.
			_ = n.Notify(ctx, "notifications/progress", p)
		}
	}
	res, err := up.Call(ctx, server, "tools/call", params, opts)
	if err != nil {
		return nil, asError(server, err)
	}
	return &kernel.Output{Result: res}, nil
}

// Origin is who a forwarded call is made for: the Caller finds it in the call's
// context (OriginFrom), so that what the upstream asks while the call is in flight
// (sampling/createMessage, elicitation/create, roots/list) can be authorized for that
// principal and reach that caller (docs/trust.md, "Requests from servers").
type Origin struct {
	Principal string
	TurnID    string
	Peer      mcpspec.Peer
}

type originKey struct{}

// OriginFrom returns the Origin of a call Build's tools forward.
func OriginFrom(ctx context.Context) (Origin, bool) {
	o, ok := ctx.Value(originKey{}).(Origin)
	return o, ok
}

// Params is the tools/call params sent upstream: the raw name, the arguments' bytes
// unchanged ("{}" when none) and, when token is set, _meta.progressToken.
func Params(raw string, args, token json.RawMessage) json.RawMessage {
	name, _ := json.Marshal(raw)
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	b := make([]byte, 0, len(name)+len(args)+len(token)+48)
	b = append(b, `{"name":`...)
	b = append(b, name...)
	b = append(b, `,"arguments":`...)
	b = append(b, args...)
	if token != nil {
		b = append(b, `,"_meta":{"progressToken":`...)
		b = append(b, token...)
		b = append(b, '}')
	}
	return append(b, '}')
}

// modernParams are a 2026-07-28 call's params as its caller sent them: the raw name,
// the arguments' bytes, its _meta, inputResponses and requestState.
func modernParams(raw string, c *kernel.Call) json.RawMessage {
	var add [][2]json.RawMessage
	for _, m := range []struct {
		name string
		v    json.RawMessage
	}{{"_meta", c.Meta}, {"inputResponses", c.InputResponses}, {"requestState", c.RequestState}} {
		if len(m.v) > 0 {
			kb, _ := json.Marshal(m.name)
			add = append(add, [2]json.RawMessage{kb, m.v})
		}
	}
	return setMembers(Params(raw, c.Arguments, nil), nil, add)
}

// progressToken is meta's progressToken when it is a string or an integer (MCP's
// ProgressToken), else nil.
func progressToken(meta json.RawMessage) json.RawMessage {
	if len(meta) == 0 {
		return nil
	}
	tok, ok := rpcwire.Member(meta, "progressToken")
	if !ok || len(tok) == 0 {
		return nil
	}
	switch c := tok[0]; {
	case c == '"', c == '-', c >= '0' && c <= '9':
		return tok
	}
	return nil
}

// asError maps what the host or relay answered to the kernel's reason codes. The
// host's own errors (*host.ServerError) are mapped by the kernel (kernel.AsError);
// the ones of the packages the kernel does not know are mapped here:
//   - the upstream's JSON-RPC error (*upstream.RPCError) is upstream_error, with its
//     code, message and data in the result's details;
//   - the relay losing or not finding the hosting process is upstream_unavailable;
//   - a context's error is returned as it is (the kernel says cancelled or timeout).
func asError(server string, err error) error {
	var re *upstream.RPCError
	var se *host.ServerError
	switch {
	case errors.As(err, &se), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.As(err, &re):
		ke := kernel.Failed(kernel.CodeUpstreamError, "server %q answered with error %d: %s", server, re.Code, clip(re.Message, 1000)).WithRetryable(false)
		ke.Details = map[string]any{"code": re.Code, "message": re.Message}
		if len(re.Data) > 0 && json.Valid(re.Data) {
			ke.Details["data"] = json.RawMessage(re.Data)
		}
		return ke
	case errors.Is(err, hostrelay.ErrHostGone), errors.Is(err, hostrelay.ErrNoHost), errors.Is(err, hostrelay.ErrUnreachable), errors.Is(err, hostrelay.ErrClosed):
		return kernel.Failed(kernel.CodeUpstreamUnavailable, "server %q: %s", server, clip(err.Error(), 1000)).WithRetryable(true)
	}
	return kernel.Failed(kernel.CodeUpstreamUnavailable, "server %q: %s", server, clip(err.Error(), 1000)).WithRetryable(true)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
