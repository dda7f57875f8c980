package mcpspec

import "slices"

// Protocol revisions.
const (
	// ModernVersion is the stateless revision: no initialize, per-request _meta,
	// server/discover, results with resultType, multi round-trip requests
	// (input_required) instead of server-to-client requests.
	ModernVersion = "2026-07-28"
	// LatestVersion is the newest session-based revision: what a server answers an
	// initialize asking for a revision it does not serve (or none), and what a client
	// offers.
	LatestVersion = "2025-11-25"
)

// SessionVersions are the session-based revisions spoken, newest first: a server
// negotiates one of them at initialize, and a client accepts an initialize answer
// naming one of them.
var SessionVersions = []string{LatestVersion, "2025-06-18", "2025-03-26", "2024-11-05"}

// IsSessionVersion reports whether v is one of SessionVersions.
func IsSessionVersion(v string) bool { return slices.Contains(SessionVersions, v) }

// Versions returns every revision spoken, newest first: ModernVersion, then
// SessionVersions (server/discover's supportedVersions, and the data of a -32022).
func Versions() []string { return append([]string{ModernVersion}, SessionVersions...) }
