package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/rpcwire"
)

// The stateless 2026-07-28 revision, served on the same endpoint as the
// session-based versions (a dual-era server): a request whose params carry
// _meta["io.modelcontextprotocol/protocolVersion"], or a server/discover, is
// answered statelessly; an initialize selects the older semantics. There is no
// server-to-client request in this era (a tool that needs input answers
// resultType "input_required" instead), and every result carries resultType.

// listTTLMs is the ttlMs of tools/list and server/discover: a turn's catalogue
// never changes, but it differs per principal, so cacheScope is "private".
const listTTLMs = 5000

// listHints are the cache hints of tools/list and server/discover.
var listHints = mcpspec.CacheHints{TTLMs: listTTLMs, CacheScope: mcpspec.CacheScopePrivate}

// modernMeta returns a 2026-07-28 request's params._meta (a slice of its
// params, never a copy: it is looked up on every request, whatever its size),
// and whether the request is one: it has _meta[protocolVersion], or it is
// server/discover.
func modernMeta(m *rpcwire.Message) (json.RawMessage, bool) {
	meta := m.Param("_meta")
	if len(meta) == 0 || meta[0] != '{' {
		meta = nil
	}
	_, versioned := rpcwire.Member(meta, mcpspec.MetaProtocolVersion)
	return meta, versioned || m.Method == mcpspec.MethodServerDiscover
}

func isModern(m *rpcwire.Message) bool {
	_, ok := modernMeta(m)
	return ok
}

// metaField is one member of a _meta object, or nil.
func metaField(meta json.RawMessage, key string) json.RawMessage {
	v, _ := rpcwire.Member(meta, key)
	return v
}

// modernVersionOf returns the protocol version a 2026-07-28 request names.
func modernVersionOf(meta json.RawMessage) (string, bool) {
	var v string
	if json.Unmarshal(metaField(meta, mcpspec.MetaProtocolVersion), &v) != nil || v == "" {
		return "", false
	}
	return v, true
}

// unsupportedVersion is the -32022 error naming the versions served.
func unsupportedVersion(v string) *jsonrpc.Error {
	data, _ := json.Marshal(unsupportedVersionData{Supported: mcpspec.Versions(), Requested: v})
	return &jsonrpc.Error{Code: mcpspec.CodeUnsupportedProtocolVersion, Message: fmt.Sprintf("unsupported protocol version %q", v), Data: data}
}

type unsupportedVersionData struct {
	Supported []string `json:"supported"`
	Requested string   `json:"requested"`
}

// checkModernMeta applies the per-request rules: the version is required and
// must be served (-32022 names the supported ones); client capabilities are
// required.
func checkModernMeta(meta json.RawMessage) *jsonrpc.Error {
	v, ok := modernVersionOf(meta)
	if !ok {
		return rpcwire.InvalidParams(fmt.Sprintf("_meta[%q] is required", mcpspec.MetaProtocolVersion))
	}
	if v != mcpspec.ModernVersion {
		return unsupportedVersion(v)
	}
	caps := metaField(meta, mcpspec.MetaClientCapabilities)
	if len(caps) == 0 || caps[0] != '{' {
		return rpcwire.InvalidParams(fmt.Sprintf("_meta[%q] is required", mcpspec.MetaClientCapabilities))
	}
	return nil
}

// inputRequiredResult is a tools/call answer asking the client for input.
type inputRequiredResult struct {
	ResultType    string          `json:"resultType"`
	InputRequests json.RawMessage `json:"inputRequests,omitempty"`
	RequestState  json.RawMessage `json:"requestState,omitempty"`
	Meta          map[string]any  `json:"_meta,omitempty"`
}

type modernCallResult struct {
	ResultType string `json:"resultType"`
	mcpspec.CallResult
}

// dispatchModern answers a 2026-07-28 request.
// peer is the transport's: its notifications reach the client (progress, log
// messages on the answer's stream), its requests never do.
func (c *conn) dispatchModern(ctx context.Context, m *rpcwire.Message, meta json.RawMessage, peer mcpspec.Peer) (any, *jsonrpc.Error) {
	switch m.Method {
	case mcpspec.MethodServerDiscover, mcpspec.MethodToolsList, mcpspec.MethodToolsCall:
	default:
		if slices.Contains(modernRelayed, m.Method) {
			if err := checkModernMeta(meta); err != nil {
				return nil, err
			}
			return c.relay(ctx, m, true, modernPeerOf(peer, meta))
		}
		// Including initialize and ping, which this era removed.
		return nil, rpcwire.MethodNotFound(m.Method)
	}
	if err := checkModernMeta(meta); err != nil {
		return nil, err
	}
	serverInfo := map[string]any{mcpspec.MetaServerInfo: c.info}
	switch m.Method {
	case mcpspec.MethodServerDiscover:
		return mcpspec.DiscoverResult{
			ResultType:        mcpspec.ResultComplete,
			SupportedVersions: mcpspec.Versions(),
			Capabilities:      c.capabilitiesJSON(true),
			Instructions:      c.instructions,
			CacheHints:        listHints,
			Meta:              serverInfo,
		}, nil
	case mcpspec.MethodToolsList:
		out, encoded, rpcErr := c.listTools(ctx)
		if rpcErr != nil {
			return nil, rpcErr
		}
		out.ResultType, out.CacheHints = mcpspec.ResultComplete, listHints
		for k, v := range out.Meta {
			serverInfo[k] = v
		}
		out.Meta = serverInfo
		return toolsResult(out, encoded)
	case mcpspec.MethodToolsCall:
		// No server-to-client requests in this era: the Peer refuses them, and a
		// tool that needs input answers input_required.
		return c.callTool(ctx, m, modernPeerOf(peer, meta), true)
	}
	return nil, rpcwire.MethodNotFound(m.Method)
}

// modernPeer is a 2026-07-28 request's Peer: the client capabilities its _meta
// declares, notifications on the answer's stream when the transport has one (stdio,
// an SSE answer), and no server-to-client request (a tool that needs input answers
// input_required).
type modernPeer struct {
	caps json.RawMessage
	pf   peerFunc
}

func modernPeerOf(peer mcpspec.Peer, meta json.RawMessage) modernPeer {
	p := modernPeer{caps: metaField(meta, mcpspec.MetaClientCapabilities)}
	if pf, ok := peer.(peerFunc); ok {
		p.pf = pf
	}
	return p
}

func (p modernPeer) ClientCapabilities() json.RawMessage { return p.caps }

func (modernPeer) Request(context.Context, string, any) (json.RawMessage, error) {
	return nil, mcpspec.ErrPeerUnsupported
}

func (p modernPeer) Notify(ctx context.Context, method string, params json.RawMessage) error {
	return p.pf.Notify(ctx, method, params)
}
