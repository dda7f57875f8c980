package toolpin

import (
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/internal/textscan"
)

// Mode is a server's pinning policy for tools it has not listed before.
type Mode string

// The modes.
const (
	// TOFU pins a new tool's definition the first time it is seen (trust on first use).
	TOFU Mode = "tofu"
	// Approve holds every new tool until a person approves it.
	Approve Mode = "approve"
)

// ParseMode reads a policy's pin value: "tofu" (also the empty string) or "approve".
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", string(TOFU):
		return TOFU, nil
	case string(Approve):
		return Approve, nil
	}
	return "", fmt.Errorf("pin: %q is not a pin policy (want \"tofu\" or \"approve\")", s)
}

// DefaultHoldAt is the HoldAt of a server whose policy does not say: a High finding
// (what no honest tool text contains) holds a definition nobody has approved.
const DefaultHoldAt = textscan.High

// Policy is what Decide applies for one server.
type Policy struct {
	// Mode is the policy for new tools (the zero value is TOFU).
	Mode Mode
	// HoldAt holds a definition whose scan has a finding at or above this severity,
	// unless a person approved exactly this definition. Zero: findings never hold (they
	// are still reported).
	HoldAt textscan.Severity
	// Scanner scans every definition Decide sees; nil scans nothing.
	Scanner *textscan.Scanner
}

// Verdict is what Decide concluded about one listed tool.
type Verdict string

// The verdicts. Only New and Unchanged are published.
const (
	// New: no pin; the definition is pinned now (trust on first use). Publish it.
	New Verdict = "new"
	// Unchanged: the definition is the pinned one. Publish it.
	Unchanged Verdict = "unchanged"
	// Pending: held until a person approves it (policy approve, or flagged). Hidden.
	Pending Verdict = "pending"
	// Changed: the definition differs from its pin: quarantined. Hidden, its calls
	// refused; the pin is kept and a hold raised with the diff.
	Changed Verdict = "changed"
	// Refused: the definition cannot be pinned (invalid, or its name is listed twice).
	// Hidden; nothing is stored.
	Refused Verdict = "refused"
)

// Publish reports whether a tool with this verdict may be published and called.
func (v Verdict) Publish() bool { return v == New || v == Unchanged }

// Decision is the outcome for one listed tool.
type Decision struct {
	Server string
	// Tool is the raw name ("" when a Refused definition had none).
	Tool    string
	Verdict Verdict
	// Hold is why the tool is held (Pending, Changed), else "".
	Hold HoldReason
	// Reason says in one line why, for details and the audit.
	Reason string
	// Definition is what the server listed (nil when Refused because it did not parse).
	Definition *Definition
	// Pinned is the pin the definition was compared with (nil when none).
	Pinned *Pin
	// Diff is the difference from the pin (Changed only).
	Diff *Diff
	// Findings are the scanner's findings on the definition.
	Findings []textscan.Finding
	// LooksLike names a pinned tool of the same server that vanished from the listing
	// and whose definition is this one's but for the name: likely a rename. A renamed
	// tool is still a new tool; this only tells the person deciding.
	LooksLike string
	// Err is why a Refused definition was refused.
	Err error
}

// Decide compares what a server lists now with the tool's pin (nil: none) under p.
// It is pure: it reads nothing and stores nothing (Reconcile does both).
func Decide(old *Pin, now Definition, p Policy) Decision {
	d := Decision{Server: now.Server, Tool: now.Name, Definition: &now, Pinned: old}
	if p.Scanner != nil {
		d.Findings = p.Scanner.Tool(&now.Value)
	}
	flagged := p.HoldAt > 0 && textscan.Max(d.Findings) >= p.HoldAt
	top := ""
	if flagged {
		top = d.Findings[0].String() // findings are sorted, highest first
	}
	switch {
	case old == nil && p.Mode == Approve:
		d.Verdict, d.Hold = Pending, HoldNew
		d.Reason = "new tool: the server's pin policy is approve, so it waits for a person to approve it"
	case old == nil && flagged:
		d.Verdict, d.Hold = Pending, HoldFlagged
		d.Reason = "new tool held for approval: " + top
	case old == nil:
		d.Verdict = New
		d.Reason = "new tool: pinned on first use"
	case old.Digest == now.Digest && flagged && !old.Approved():
		d.Verdict, d.Hold = Pending, HoldFlagged
		d.Reason = "held for approval (pinned on first use, never approved by a person): " + top
	case old.Digest == now.Digest:
		d.Verdict = Unchanged
		d.Reason = "unchanged"
	default:
		diff, err := Compare(old.Canonical, now.Canonical)
		d.Verdict, d.Hold = Changed, HoldChanged
		if err != nil {
			d.Reason = fmt.Sprintf("definition changed since it was pinned (the pin could not be read for a diff: %v)", err)
		} else {
			d.Diff = &diff
			d.Reason = "definition changed since it was pinned: " + diff.Summary()
		}
	}
	return d
}
