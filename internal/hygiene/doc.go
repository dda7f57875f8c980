// Package hygiene holds repository-wide checks that run with the ordinary test command:
// every package documents itself, the pinned SQLite runtime has not drifted, and main
// stays a thin adapter. It has no code of its own.
package hygiene
