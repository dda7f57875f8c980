// Package mcpserver serves MCP to harnesses over stdio and Streamable HTTP: the bridge
// contract of docs/http-contract.md (methods, status codes, headers, sessions), strict
// JSON-RPC handling through rpcwire, and the DNS-rebinding and size protections on top.
// It owns no policy: every tools/list and tools/call is handed to a Turn, an interface
// this package declares in the shared MCP vocabulary (internal/mcpspec) and the kernel
// satisfies without importing this package.
//
// Entry points: NewBridge (one turn for every session it opens, a loopback
// listener), NewHandler (a session per initialize, each with its own Turn, for the
// daemon), ServeStdio, and Guard (the Host/Origin/Content-Type checks as middleware
// for other routes). Every
// entry point serves both eras on one endpoint or stream: the session-based protocol
// versions 2024-11-05 to 2025-11-25 (selected by initialize) and the stateless
// 2026-07-28 revision (selected by per-request _meta or server/discover), unless its
// NoStateless option turns the latter off. The wire contract is docs/http-contract.md,
// pinned by the golden files in testdata/wire.
//
// Files: protocol.go (methods, shared by both transports), modern.go (2026-07-28),
// http.go (the Streamable HTTP core and SSE), bridge.go, handler.go (sessions, cap,
// idle reaping), stdio.go, guard.go, status.go (the refusals this surface answers:
// rows of the one table every HTTP surface shares, internal/httpwire).
package mcpserver
