// Package manage drives the real toolgate binary's management commands (install, ls,
// policy set, restart, uninstall, details) with the Go fixture upstream, both against
// a running `toolgate serve` (found through its daemon.json) and with none running (the
// command opens the data directory itself), and checks their --json answers against
// golden shapes, the processes they leave (none), a stale daemon file, and one
// upstream process per data directory however many toolgate processes use it.
package manage
