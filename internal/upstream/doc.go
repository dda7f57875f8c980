// Package upstream is the MCP client side of one upstream server: it starts and
// stops a stdio server's process (Process) and speaks raw JSON-RPC to a server
// over stdio, Streamable HTTP or the legacy HTTP+SSE transport (Conn). The
// supervisor (internal/host) decides when to start, restart and stop; this
// package guarantees what one process and one connection do. See
// docs/upstream.md for the behaviour in one place.
//
// What it guarantees, and why:
//
//   - A stdio server runs as its literal argv (no shell, so no quoting or
//     injection through arguments) in its own process group with a parent-death
//     signal, because npx/uvx servers are trees: signalling only the pid (as
//     mcp.CommandTransport does) leaves grandchildren running. Stop closes stdin,
//     then sends SIGTERM to the group, then SIGKILL to the group, and reaps; when
//     the leader exits for any reason the rest of its group is terminated too.
//     Processes are started from one OS thread locked for the life of the
//     program, because Linux delivers the parent-death signal when the creating
//     thread exits, not the process.
//   - The environment is built from nothing: the declared variables plus a small
//     base (PATH, HOME, LANG, TMPDIR and a few more copied from toolgate's
//     environment), never toolgate's whole environment, which holds its own token
//     and other servers' secrets. Environment and header values are secrets:
//     no log line or error this package produces contains them, and errors name
//     only the command, never its arguments.
//   - stdout is protocol only. A line that is not a JSON object or array is
//     dropped, counted and logged (truncated); it is never fatal, because servers
//     print banners. One message is capped (DefaultMaxMessageBytes, 16 MiB): a
//     longer line is skipped without being buffered, and if it was a response the
//     call it answers fails with *MessageTooLargeError. stderr is kept only as a
//     bounded tail.
//   - Payloads are raw bytes end to end: params and results are json.RawMessage
//     and are never re-marshalled through typed structs, because the typed
//     go-sdk client drops unknown fields, reorders schemas and rewrites numbers
//     (1.50 becomes 1.5). A result reaches the caller exactly as the server wrote
//     it.
//   - Request ids are connection-local: every call gets a fresh integer id, so
//     callers sharing one upstream can never collide and a caller's id never
//     reaches the server. A caller's progressToken is replaced by that id and
//     restored on the way back. A cancelled context sends notifications/cancelled
//     for the upstream id (or nothing, if the request was never written) and the
//     call returns at once; a dead connection fails every pending call at once
//     with *ClosedError.
//   - Memory is bounded: one message, the stderr tail, the queue of upstream
//     notifications (drop-oldest, counted), the number of upstream-to-client
//     requests in flight. No lock is held across I/O, and each connection has one
//     reader.
//   - Over HTTP, configured headers are added by a RoundTripper on each hop and
//     only for the configured origin, so a redirect to another origin carries
//     none of them; no other header is ever forwarded. A 401 (or a 403 with a
//     Bearer challenge) ends the attempt with *AuthRequiredError carrying the
//     WWW-Authenticate challenge, and is never retried here by itself: an
//     Authorizer (HTTPSpec.Auth, OAuth in internal/upstreamauth) owns the
//     Authorization header and decides whether new credentials are worth one
//     more send, within a fixed bound.
//   - One era per connection (Options.Era): the initialize handshake and its
//     session, or the stateless 2026-07-28 revision (server/discover, _meta
//     spliced into every request's raw params, the Mcp-* headers, no session
//     id ever adopted). Probing falls back to initialize on a new HTTP
//     connection, never by mixing the two on one.
//
// Files: process.go (Process, Spec, Stop), process_*.go (OS specifics),
// stderr.go (the tail), linefilter.go (stdout filtering and the size cap),
// conn.go (Conn: ids, calls, cancellation, dispatch), progress.go (token
// rewriting), notify.go (the notification queue), stdio.go, http.go (HTTP
// dialing and fallback), roundtrip.go (header injection), listen.go (the
// standalone GET stream), auth.go (the Authorizer hook), era.go (the
// stateless revision: discover, _meta, headers), paramheaders.go
// (x-mcp-header), errors.go.
package upstream
