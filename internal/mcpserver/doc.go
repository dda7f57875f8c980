// Package mcpserver serves MCP to harnesses over stdio and Streamable HTTP: the bridge
// contract of seed 000 (methods, status codes, headers, sessions), strict JSON-RPC
// handling through rpcwire, and the DNS-rebinding and size protections on top. It owns
// no policy: every tools/list and tools/call is handed to a Turn.
package mcpserver

import "errors"

// ErrPeerUnsupported is returned by Peer.Request when the client cannot be asked.
var ErrPeerUnsupported = errors.New("mcpserver: the client cannot receive requests on this connection")
