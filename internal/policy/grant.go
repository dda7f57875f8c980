// Package policy turns grants into decisions. Grants are compiled once per change into an
// immutable set that both the catalogue filter and per-call authorization read, so the
// list a harness sees and the decision on its calls can never disagree. Default deny; an
// explicit deny wins over any allow.
package policy

import "time"

// Effect is whether a grant allows or denies what it matches.
type Effect string

const (
	Allow Effect = "allow"
	Deny  Effect = "deny"
)

// Grant is principal × tool pattern × action × resource scope.
type Grant struct {
	ID string
	// Principal is an exact principal (agent, session or group identity) or "*".
	Principal string
	// Tool is a canonical tool id, a namespace wildcard "ns.*", or "*".
	Tool string
	// Action is "read", "write", "execute" or "*".
	Action string
	// Resource is the scope: "" or "*" for any resource; a value ending in "/" is a
	// prefix over normalised resources ("path:docs/" covers "path:docs/a.md"); anything
	// else must match exactly. "path:" alone covers the whole workspace except
	// protected paths.
	Resource  string
	Effect    Effect
	CreatedAt time.Time
	Note      string
}
