// Package host supervises the upstream MCP servers toolgate hosts: one runtime per
// installed server owns its lifecycle (lazy start, single-flight starts, idle stop,
// restarts with backoff and jitter, a crash-loop circuit, auth_required), its health
// (MCP pings: slow is degraded, repeated failures restart), its catalogue (tools,
// resources, resource templates and prompts kept as raw JSON, versioned, refreshed on
// list_changed, persisted through a CatalogStore) and who shares its connection
// (shared, or one per caller session).
//
// The host talks to upstreams only through the Dialer and Session interfaces it
// defines; an adapter over internal/upstream implements them in the daemon, and
// internal/host/hosttest provides fakes. It reports every installation, state and
// catalogue change to an Observer, which the management protocol maps onto
// mcp/changed, mcp/server/status_changed and mcp/server/catalog_changed.
//
// docs/host.md is the reference: the ten states and every transition between them
// (the same table as [Transitions]), the timings and limits, the errors callers get,
// and how the integrator wires it.
package host
