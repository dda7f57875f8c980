package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/rpcwire"
)

// StatelessProtocolVersion is the stateless revision (mcpspec.ModernVersion): no
// initialize, no session, server/discover and per-request _meta instead.
const StatelessProtocolVersion = mcpspec.ModernVersion

// Era is how a connection talks to its server. One connection has one era
// for its whole life: a legacy connection never sends server/discover or
// per-request _meta, a stateless one never sends initialize or a session id.
type Era int

const (
	// EraLegacy is the initialize handshake (2024-11-05 … 2025-11-25) and, over
	// HTTP, a session. The default.
	EraLegacy Era = iota
	// EraStateless is the 2026-07-28 revision: server/discover first, then
	// every request carries _meta (protocol version, capabilities, client
	// info) and, over HTTP, the Mcp-Method, Mcp-Name and Mcp-Param-* headers.
	// A server that does not speak it fails the dial.
	EraStateless
	// EraProbe asks server/discover first and falls back to initialize when
	// the answer is not a 2026-07-28 one (over HTTP on a new connection, over
	// stdio on the same process, as the revision's compatibility rules say).
	EraProbe
)

func (e Era) String() string {
	switch e {
	case EraStateless:
		return "stateless"
	case EraProbe:
		return "probe"
	}
	return "legacy"
}

// The _meta keys of a 2026-07-28 request.
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
	metaServerInfo         = "io.modelcontextprotocol/serverInfo"
)

// The 2026-07-28 error codes a server answers only when it speaks that
// revision: getting one is proof of the era even when the request failed.
const (
	codeHeaderMismatch      = -32020
	codeMissingCapability   = -32021
	codeUnsupportedProtocol = -32022
)

// EraError reports a request that belongs to the other era (initialize on a
// stateless connection, server/discover on a legacy one): sending it would mix
// eras on one connection.
type EraError struct {
	Method string
	Era    Era
}

func (e *EraError) Error() string {
	return fmt.Sprintf("upstream: %s is not sent on a %s connection", e.Method, e.Era)
}

// ErrNotStateless is the probe's verdict, and a stateless dial's error (wrapped):
// the server answered server/discover in a way only an older server does (the
// probe falls back to initialize).
var ErrNotStateless = errors.New("upstream: the server does not speak the stateless revision")

// errNotStateless is ErrNotStateless under the name this package's code uses.
var errNotStateless = ErrNotStateless

// clientCapabilitiesKey carries, in a request's context, the client capabilities a
// stateless request declares instead of Options.Capabilities (WithClientCapabilities).
type clientCapabilitiesKey struct{}

// WithClientCapabilities returns ctx under which a request on a stateless connection
// declares caps (a JSON object) as its _meta clientCapabilities instead of the
// connection's Options.Capabilities: a gateway relaying one caller's 2026-07-28
// request declares what that caller declared, never another caller's. A legacy
// connection ignores it (its capabilities were declared once, at initialize).
func WithClientCapabilities(ctx context.Context, caps json.RawMessage) context.Context {
	return context.WithValue(ctx, clientCapabilitiesKey{}, caps)
}

// wrongEra reports a method that does not belong to the connection's era.
func (c *Conn) wrongEra(method string) error {
	switch c.era {
	case EraStateless:
		if method == "initialize" || method == "notifications/initialized" {
			return &EraError{Method: method, Era: c.era}
		}
	case EraLegacy:
		if method == "server/discover" {
			return &EraError{Method: method, Era: c.era}
		}
	}
	return nil
}

// metaMembers is the encoded "key":value list the stateless revision puts in
// every request's _meta, computed once per connection.
func (c *Conn) metaMembers() ([]byte, error) {
	return c.metaMembersWith(c.opts.Capabilities)
}

// metaMembersWith is metaMembers declaring caps.
func (c *Conn) metaMembersWith(caps json.RawMessage) ([]byte, error) {
	info, err := rpcwire.Encode(c.opts.ClientInfo)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	for i, kv := range [][2]json.RawMessage{
		{json.RawMessage(`"` + metaProtocolVersion + `"`), json.RawMessage(`"` + StatelessProtocolVersion + `"`)},
		{json.RawMessage(`"` + metaClientCapabilities + `"`), caps},
		{json.RawMessage(`"` + metaClientInfo + `"`), info},
	} {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(kv[0])
		b.WriteByte(':')
		b.Write(kv[1])
	}
	return b.Bytes(), nil
}

// ownMetaKey reports a _meta key the connection sets itself.
func ownMetaKey(k string) bool {
	return k == metaProtocolVersion || k == metaClientCapabilities || k == metaClientInfo
}

// withMeta returns params with the connection's _meta members in params._meta
// (created when absent). Every other byte of params, and every other member of
// its _meta (progressToken, traceparent…), is kept as it was; a member of
// _meta the connection sets is replaced, never doubled.
func withMeta(params json.RawMessage, members []byte) (json.RawMessage, error) {
	return spliceMeta(params, members, ownMetaKey)
}

// spliceMeta is withMeta for any set of members: those of params._meta whose key
// drop names are replaced by members.
func spliceMeta(params json.RawMessage, members []byte, drop func(string) bool) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(params)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return json.RawMessage(`{"_meta":{` + string(members) + `}}`), nil
	}
	if trimmed[0] != '{' || trimmed[len(trimmed)-1] != '}' {
		return nil, errors.New("upstream: params must be a JSON object")
	}
	ms, me, ok := memberValue(trimmed, "_meta")
	if !ok {
		if !json.Valid(trimmed) {
			return nil, errors.New("upstream: params are not valid JSON")
		}
		body := bytes.TrimSpace(trimmed[1 : len(trimmed)-1])
		out := make([]byte, 0, len(trimmed)+len(members)+12)
		out = append(out, trimmed[:len(trimmed)-1]...)
		if len(body) > 0 {
			out = append(out, ',')
		}
		out = append(out, `"_meta":{`...)
		out = append(out, members...)
		return append(out, "}}"...), nil
	}
	meta := trimmed[ms:me]
	if len(meta) == 0 || meta[0] != '{' {
		return nil, errors.New("upstream: params._meta must be a JSON object")
	}
	kept, err := objectMembersExcept(meta, drop)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(trimmed)+len(members)+2)
	out = append(out, trimmed[:ms]...)
	out = append(out, '{')
	out = append(out, kept...)
	if len(kept) > 0 && len(members) > 0 {
		out = append(out, ',')
	}
	out = append(out, members...)
	out = append(out, '}')
	return append(out, trimmed[me:]...), nil
}

// objectMembersExcept returns the members of a JSON object, each key and
// value as written, comma separated, leaving out those whose key drop names.
func objectMembersExcept(obj []byte, drop func(string) bool) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("upstream: not a JSON object")
	}
	var out []byte
	for dec.More() {
		start := dec.InputOffset()
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		k, _ := t.(string)
		if drop(k) {
			continue
		}
		member := bytes.TrimLeft(obj[start:dec.InputOffset()], " \t\r\n,")
		if len(out) > 0 {
			out = append(out, ',')
		}
		out = append(out, member...)
	}
	return out, nil
}

// discover is the stateless handshake: server/discover, once more with a
// version the server names if it refuses the first with -32022. It returns
// errNotStateless (wrapped) when the answer is one only an older server gives.
func (c *Conn) discover(ctx context.Context) error {
	res, err := c.call(ctx, "server/discover", nil, nil, true)
	var rpcErr *RPCError
	if errors.As(err, &rpcErr) && rpcErr.Code == codeUnsupportedProtocol {
		var data struct {
			Supported []string `json:"supported"`
		}
		_ = json.Unmarshal(rpcErr.Data, &data)
		if !slices.Contains(data.Supported, StatelessProtocolVersion) {
			return fmt.Errorf("upstream: server/discover: the server supports %v, not %s: %w", data.Supported, StatelessProtocolVersion, errNotStateless)
		}
		// Asked again: the first refusal may have been for something else
		// the version named (the revision's negotiation is "pick one of
		// supported and retry").
		res, err = c.call(ctx, "server/discover", nil, nil, true)
	}
	if err != nil {
		var auth *AuthRequiredError
		switch {
		case errors.As(err, &auth), ctx.Err() != nil:
			return err
		case errors.As(err, &rpcErr) && (rpcErr.Code == codeHeaderMismatch || rpcErr.Code == codeMissingCapability || rpcErr.Code == codeUnsupportedProtocol):
			return fmt.Errorf("upstream: server/discover: %w", err)
		}
		return fmt.Errorf("upstream: server/discover: %w: %w", err, errNotStateless)
	}
	var r struct {
		SupportedVersions []string                   `json:"supportedVersions"`
		Capabilities      json.RawMessage            `json:"capabilities"`
		Instructions      string                     `json:"instructions"`
		ServerInfo        json.RawMessage            `json:"serverInfo"`
		Meta              map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return fmt.Errorf("upstream: server/discover result is not a DiscoverResult: %w: %w", err, errNotStateless)
	}
	if !slices.Contains(r.SupportedVersions, StatelessProtocolVersion) {
		return fmt.Errorf("upstream: server/discover: the server supports %v, not %s: %w", r.SupportedVersions, StatelessProtocolVersion, errNotStateless)
	}
	info := r.Meta[metaServerInfo]
	if info == nil {
		info = r.ServerInfo
	}
	c.hs = Handshake{
		Era:             EraStateless,
		ProtocolVersion: StatelessProtocolVersion,
		ServerInfo:      info,
		Capabilities:    r.Capabilities,
		Instructions:    r.Instructions,
		Result:          res,
	}
	return nil
}

// statelessHeaders are the headers a 2026-07-28 request carries over HTTP
// besides MCP-Protocol-Version: Mcp-Method always; Mcp-Name for tools/call and
// prompts/get (params.name) and resources/read (params.uri); for tools/call,
// Mcp-Param-{Name} for each argument the tool's inputSchema annotates with
// x-mcp-header. Values that are not plain visible ASCII are sent in the
// =?base64?…?= form (docs/http-contract.md).
func (c *Conn) statelessHeaders(method string, params json.RawMessage) http.Header {
	h := http.Header{"Mcp-Method": {method}}
	var p struct {
		Name      *string         `json:"name"`
		URI       *string         `json:"uri"`
		Arguments json.RawMessage `json:"arguments"`
	}
	switch method {
	case "tools/call", "prompts/get", "resources/read":
		if json.Unmarshal(params, &p) != nil {
			return h
		}
	default:
		return h
	}
	switch {
	case method == "resources/read" && p.URI != nil:
		h.Set("Mcp-Name", mcpspec.EncodeHeaderValue(*p.URI))
	case method != "resources/read" && p.Name != nil:
		h.Set("Mcp-Name", mcpspec.EncodeHeaderValue(*p.Name))
	}
	if method == "tools/call" && p.Name != nil {
		if th, ok := c.tools.get(*p.Name); ok && th.Err == nil {
			for name, v := range th.Values(p.Arguments) {
				h["Mcp-Param-"+name] = []string{v}
			}
		}
	}
	return h
}

// stateless prepares a 2026-07-28 request: the connection's _meta members in
// its params and, over HTTP, its headers in the context the go-sdk transport
// builds the POST with. A tools/call of a tool whose x-mcp-header annotations
// are invalid is refused here, never sent.
func (c *Conn) stateless(ctx context.Context, method string, params json.RawMessage) (context.Context, json.RawMessage, error) {
	if method == "tools/call" {
		var p struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(params, &p) == nil {
			if th, ok := c.tools.get(p.Name); ok && th.Err != nil {
				return ctx, nil, &InvalidToolError{Tool: p.Name, Err: th.Err}
			}
		}
	}
	members := c.meta
	if caps, ok := ctx.Value(clientCapabilitiesKey{}).(json.RawMessage); ok {
		if !isObject(caps) {
			return ctx, nil, errors.New("upstream: the request's client capabilities must be a JSON object")
		}
		var err error
		if members, err = c.metaMembersWith(caps); err != nil {
			return ctx, nil, err
		}
	}
	out, err := withMeta(params, members)
	if err != nil {
		return ctx, nil, err
	}
	if c.t.kind != "stdio" {
		ctx = context.WithValue(ctx, requestHeadersKey{}, c.statelessHeaders(method, out))
	}
	return ctx, out, nil
}
