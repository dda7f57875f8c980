// Package hygiene holds repository-wide checks that run with the ordinary test command:
// every package documents itself, the pinned SQLite runtime has not drifted, main stays
// a thin adapter, and imports go the way docs/architecture.md draws them. It has no code
// of its own.
package hygiene
