package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/rpcwire"
)

// The session-based handshake (docs/http-contract.md, "Handshake"). A
// connection (stdio) or session (HTTP) of the session-based era serves
// tools/list and tools/call only once an initialize succeeded on it: a Turn is
// never asked anything on behalf of a client that skipped the handshake. initialize cannot be batched
// (2025-03-26 forbids it, and a batch's requests run side by side, so a call
// batched behind it would run before the handshake), and a second one on the
// same connection or session is refused: a client that starts over sends its
// initialize naming no session, which opens a new one (a Handler's, or a
// Bridge's next session on its turn). A request that
// identifies itself as 2026-07-28 (its _meta protocol version, or
// server/discover) needs no handshake. Requests after initialize but before
// notifications/initialized are served, as the protocol allows; the server
// sends its own requests (other than ping) only once that notification came.

// admit decides whether request m may run under the handshake; nil admits it.
// batch is true when m came inside a batch. Only the methods a session serves
// wait for initialize: ping is answered at any time, and an unknown method is
// -32601 either way (so a server/discover probe of a server that does not
// serve 2026-07-28 learns just that).
func (c *conn) admit(m *rpcwire.Message, batch bool) *jsonrpc.Error {
	if c.stateless && isModern(m) {
		return nil
	}
	switch m.Method {
	case mcpspec.MethodInitialize:
		if batch {
			return rpcwire.InvalidRequest("initialize cannot be batched")
		}
		return nil // initialize itself refuses a second one, atomically
	case mcpspec.MethodToolsList, mcpspec.MethodToolsCall:
		// The methods served in a session (dispatch); ping and unknown
		// methods are answered without one.
	default:
		// A relayed method waits for initialize too, where the turn relays.
		if _, relays := asRelay(c.turn); !relays || !isRelayed(m.Method) {
			return nil
		}
	}
	c.mu.Lock()
	ok := c.initialized
	c.mu.Unlock()
	if !ok {
		return notInitialized(m.Method)
	}
	return nil
}

func notInitialized(method string) *jsonrpc.Error {
	return rpcwire.InvalidRequest(fmt.Sprintf("%q before initialize: the session is not initialized", method))
}

// initialize answers an initialize request and, when it succeeds, opens the
// session: the version is negotiated and the client's capabilities recorded.
// The check for an earlier initialize and the opening happen under one lock, so
// of two concurrent initializes on a session only one succeeds.
func (c *conn) initialize(m *rpcwire.Message) (any, *jsonrpc.Error) {
	if m.Params != nil && m.Params[0] != '{' {
		return nil, rpcwire.InvalidParams("initialize params must be an object")
	}
	version := mcpspec.LatestVersion
	var asked string
	if json.Unmarshal(m.Param("protocolVersion"), &asked) == nil && mcpspec.IsSessionVersion(asked) {
		version = asked
	}
	// A copy: the session keeps it, not the whole body it came in.
	caps := bytes.Clone(m.Param("capabilities"))
	if len(caps) == 0 || caps[0] != '{' {
		caps = nil
	}
	c.mu.Lock()
	if c.initialized {
		c.mu.Unlock()
		return nil, rpcwire.InvalidRequest("the session is already initialized")
	}
	c.version = version
	c.clientCaps = caps
	c.initialized = true
	c.ready = false // until this handshake's notifications/initialized
	c.mu.Unlock()
	if n, ok := c.turn.(ClientNoter); ok {
		info := m.Param("clientInfo")
		if len(info) == 0 || info[0] != '{' {
			info = nil
		}
		n.NoteClient(version, bytes.Clone(info))
	}
	return mcpspec.InitializeResult{
		ProtocolVersion: version,
		Capabilities:    c.capabilitiesJSON(false),
		ServerInfo:      c.info,
		Instructions:    c.instructions,
	}, nil
}

// initializedNotice handles notifications/initialized: it completes the
// handshake of an initialized session and means nothing before one.
func (c *conn) initializedNotice() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.initialized {
		c.ready = true
	}
}

// isInitialized reports whether an initialize succeeded on the connection.
func (c *conn) isInitialized() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.initialized
}
