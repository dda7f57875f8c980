// Package hostrelay makes one process host a data directory's upstream servers and
// every other toolgate process on that directory use them, so no server runs twice on
// one data directory.
//
// [Upstreams] is what the app holds: calls, catalogues, statuses, session ends,
// restarts, reloads and the host's events. [Local] is it over this process's own
// *host.Host; [Node] is it for a process that shares the data directory: [Open] runs
// an election, and the process that wins the exclusive flock on upstream.lock builds
// its host (the integrator's [NewHostFunc]) and serves the others over a unix socket
// in the data directory, upstream.sock (0600, the peer's uid checked with SO_PEERCRED
// both ways). The others relay every request to it over JSON-RPC on newline-delimited
// JSON, with the upstream's bytes carried unchanged, progress streamed back,
// cancellation forwarded and the host's events pushed. When the host goes away, its
// clients' requests under way fail at once with *[HostGoneError], and the next
// request elects again: one process takes the lock and hosts, the rest reconnect.
//
// Why a lock and a socket: the kernel drops a flock when its holder dies, however it
// dies, so a killed host never leaves the directory locked; only the holder binds or
// removes the socket, so the socket is never served by two processes; the holder
// releases the lock only after its host has shut down, so a second copy of a server
// cannot start while the first still runs.
//
// Every queue is bounded (message size, requests in flight per connection,
// notifications per client, events per watcher), and nothing the host does waits for
// a client: a client that stops reading loses notifications (and resyncs), then is
// dropped. docs/hostrelay.md is the reference: the election, the socket, the
// protocol, the bounds and the failure modes.
package hostrelay
