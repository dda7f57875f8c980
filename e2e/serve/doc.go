// Package serve drives the real `toolgate serve` binary as a subprocess: first start,
// the same catalogue over /mcp and /v1/tools, per-principal sessions, invoke equal to
// tools/call, escalation through the CLI, kill -9 never leaving an executed call
// without its audit event, SIGTERM exiting cleanly, and the tamper check.
package serve
