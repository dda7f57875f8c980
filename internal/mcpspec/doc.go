// Package mcpspec is the vocabulary of the Model Context Protocol that both sides of
// toolgate speak: the server side that serves harnesses (internal/mcpserver, the HTTP
// API in internal/httpapi, the kernel behind them) and the client side that talks to
// upstream servers (internal/upstream, internal/host and the adapters between them and
// the kernel). It holds what travels between them — tool definitions, call requests and
// results, resources, resource templates, prompts, completions, list results with their
// cache hints, the Peer a tool uses to ask its client something — and the names both
// sides must agree on: protocol revisions, method names, _meta keys and the error codes
// of the stateless revision.
//
// It owns no behaviour and imports nothing of toolgate's, so that neither surface
// depends on the other to speak: the kernel imports this package and no surface, and an
// upstream client never imports the server package. Interfaces that a consumer needs
// (mcpserver.Turn, httpapi.Turn) stay with that consumer and are written in these types.
//
// Raw bytes, end to end. Schemas, arguments, content blocks and results are
// json.RawMessage wherever toolgate passes them on rather than reads them, so what an
// upstream server wrote reaches the harness with its unknown members, key order and
// number spelling intact, and what a harness sent is decided on and forwarded as the
// strict decoder (internal/rpcwire) encoded it; nothing that is forwarded is
// re-marshalled through a typed struct. The typed fields here are the ones toolgate
// itself reads or writes. See docs/architecture.md.
package mcpspec
