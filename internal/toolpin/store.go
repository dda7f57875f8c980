package toolpin

import (
	"context"
	"encoding/json"
	"time"

	"github.com/toolgate/toolgate/internal/textscan"
)

// Pin is the definition of one (server, tool name) that toolgate publishes: the only
// definition of that name it will publish until a person approves another.
type Pin struct {
	Server string `json:"server"`
	// Tool is the tool's raw name, as the server sends it.
	Tool string `json:"tool"`
	// Digest is the digest of Canonical.
	Digest string `json:"digest"`
	// Canonical is the pinned definition in canonical JSON: what a diff is made from.
	Canonical json.RawMessage `json:"canonical"`
	// FirstSeen is when this definition was first listed by the server.
	FirstSeen time.Time `json:"first_seen"`
	// ApprovedBy names who approved the definition; "" when it was trusted on first use.
	ApprovedBy string `json:"approved_by,omitempty"`
	// ApprovedAt is when; zero when trusted on first use.
	ApprovedAt time.Time `json:"approved_at,omitzero"`
}

// Approved reports whether a person approved this pin (rather than first use).
func (p Pin) Approved() bool { return p.ApprovedBy != "" }

// HoldReason is why a definition is held back.
type HoldReason string

// The reasons.
const (
	// HoldNew: a tool not seen before, under a policy that approves every new tool.
	HoldNew HoldReason = "new"
	// HoldChanged: a pinned tool whose definition changed (quarantine).
	HoldChanged HoldReason = "changed"
	// HoldFlagged: the scanner flagged the definition at or above the policy's HoldAt
	// and no person has approved it.
	HoldFlagged HoldReason = "flagged"
)

// HoldState is where a hold's approval stands.
type HoldState string

// The states. A hold is deleted when approved (the definition becomes the pin) or when
// the server goes back to listing the pinned definition.
const (
	// HoldPending: waiting for a person.
	HoldPending HoldState = "pending"
	// HoldRejected: a person refused this definition. The tool stays hidden and is not
	// raised again while the server keeps listing this same definition.
	HoldRejected HoldState = "rejected"
)

// Hold is a definition held back from publication: the approval an owner decides (from
// the CLI or the management protocol, never from an MCP tool).
type Hold struct {
	Server string     `json:"server"`
	Tool   string     `json:"tool"`
	Reason HoldReason `json:"reason"`
	State  HoldState  `json:"state"`
	// Digest and Canonical are the held definition.
	Digest    string          `json:"digest"`
	Canonical json.RawMessage `json:"canonical"`
	// PinnedDigest is the pin it differs from ("" when there is none).
	PinnedDigest string `json:"pinned_digest,omitempty"`
	// Findings are the scanner's findings on the held definition.
	Findings []textscan.Finding `json:"findings,omitempty"`
	// FirstSeen is when the server first listed this definition; LastSeen the latest.
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	// DecidedBy and DecidedAt record a rejection.
	DecidedBy string    `json:"decided_by,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
}

// Store keeps pins and holds. Toolpin owns the interface; internal/store implements it,
// toolpintest has an in-memory one and RunStore, the suite every Store must pass.
// Servers and tool names are compared exactly (byte for byte): the tool names are the
// server's raw names, and two names that differ only in case are two tools here.
type Store interface {
	// Pin returns the pin of (server, tool); ok is false when there is none.
	Pin(ctx context.Context, server, tool string) (p Pin, ok bool, err error)
	// Pins lists the pins of server, sorted by tool.
	Pins(ctx context.Context, server string) ([]Pin, error)
	// PutPin creates or replaces the pin of (p.Server, p.Tool) and, in the same
	// transaction, deletes that tool's hold if any: approving a held definition and
	// re-pinning are one step, so a crash cannot leave the pin and a stale hold.
	PutPin(ctx context.Context, p Pin) error
	// PinIfAbsent stores p (deleting the tool's hold, as PutPin does) only when
	// (p.Server, p.Tool) has no pin, atomically; otherwise it changes nothing and
	// returns the pin there is. Trust on first use is this compare-and-set: of two
	// processes that both saw no pin, the second meets the first's pin and decides its
	// listing against it (a changed definition is quarantined), never overwrites it.
	PinIfAbsent(ctx context.Context, p Pin) (existing Pin, inserted bool, err error)
	// Hold returns the hold of (server, tool); ok is false when there is none.
	Hold(ctx context.Context, server, tool string) (h Hold, ok bool, err error)
	// Holds lists the holds of server, or of every server when server is "", sorted by
	// server then tool.
	Holds(ctx context.Context, server string) ([]Hold, error)
	// PutHold creates or replaces the hold of (h.Server, h.Tool).
	PutHold(ctx context.Context, h Hold) error
	// DeleteHold removes the hold of (server, tool); no hold is not an error.
	DeleteHold(ctx context.Context, server, tool string) error
	// DeleteHoldIf removes the hold of (server, tool) only while it holds the
	// definition with this digest, atomically: a reconciliation clears the hold it
	// read, never one another process raised since.
	DeleteHoldIf(ctx context.Context, server, tool, digest string) error
	// DeleteServer removes every pin and hold of server (it was uninstalled).
	DeleteServer(ctx context.Context, server string) error
}
