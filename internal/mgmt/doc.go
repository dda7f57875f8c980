// Package mgmt is toolgate's management protocol: the JSON-RPC 2.0 methods that install,
// list, reconfigure, restart, uninstall and inspect upstream MCP servers, and the
// notifications that tell a client its view went stale. docs/management.md is the
// contract (every method with a worked example, every error code, the transports);
// the golden files in testdata/golden pin each method's answer byte for byte.
//
// The package owns three things and nothing else:
//
//   - the wire types (params and results, snake_case as the protocol spells them);
//   - [Manager], the interface a data directory's owner implements (the app), and
//     [Checked], which applies the protocol's defaults and validation in front of any
//     Manager so the daemon and an in-process command share one reading of params;
//   - the surfaces over a Manager: [Handler] (POST and WebSocket on /v1/rpc), [Client]
//     (the CLI's typed POST client) and the Write* renderers the CLI prints with.
//
// It never decides anything about servers itself: what a name resolves to, what is
// installed and what is audited are the Manager's.
package mgmt
