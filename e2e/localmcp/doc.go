// Package localmcp holds the end-to-end tests of `toolgate mcp`: the real binary is
// spawned as a subprocess and driven with the official Go SDK client over stdio, the way
// a harness (Claude Desktop, Cursor, Goose) drives it.
package localmcp
