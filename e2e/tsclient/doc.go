// Package tsclient holds the interop tests in which the official MCP TypeScript SDK
// (@modelcontextprotocol/sdk, pinned in testdata/npm/package.json) is the client of
// the real toolgate binary: StreamableHTTPClientTransport against `toolgate bridge`,
// against the bridge `toolgate run` opens for a harness, and against `toolgate serve`
// (owner and minted tokens); StdioClientTransport spawning `toolgate mcp`. A feature
// only counts once a peer other than our own Go code uses it, so each test runs a
// scripted session (testdata/tsclient.mjs, plain ESM run by Node 22) and checks the
// one JSON line it prints: catalogue and catalogHash, allowed calls, refusals as
// results with their reason codes, elicitation, DELETE and the 404 that follows, and
// the protocol version each side negotiated. replicas_test.go puts two `toolgate
// serve` replicas on one PostgreSQL behind a round-robin proxy (testenv.RoundRobin):
// the TypeScript and Go SDKs keep sessions whose requests both replicas serve, and the
// official conformance suite's 2026-07-28 requirements pass through the replicas
// wherever they pass on one daemon.
package tsclient
