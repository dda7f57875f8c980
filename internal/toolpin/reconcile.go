package toolpin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/toolgate/toolgate/internal/canonjson"
)

// Report is what Reconcile decided for one listing of a server's tools.
type Report struct {
	Server string
	// Decisions has one entry per listed tool, in the listing's order.
	Decisions []Decision
	// Raised are the holds this listing raised (a definition held for the first time):
	// each is an approval to announce and audit. A hold already raised for the same
	// definition is not raised again, so a server that keeps listing it causes no storm.
	Raised []Hold
	// Vanished are pinned tools the listing no longer has. Their pins are kept: a tool
	// that comes back unchanged is published again without a new approval.
	Vanished []string
}

// Published returns the decisions whose tools may be published, in listing order.
func (r *Report) Published() []Decision {
	var out []Decision
	for _, d := range r.Decisions {
		if d.Verdict.Publish() {
			out = append(out, d)
		}
	}
	return out
}

// Reconcile decides every tool of one listing of server (the "tools" array of
// tools/list, every page, as raw JSON objects) under p, and records the outcome in st:
// new tools trusted on first use are pinned; held definitions get a hold (kept, with
// its first-seen time and any rejection, while the same definition is listed); a tool
// listed as its pinned definition again loses any hold it had; holds of tools no longer
// listed are deleted. Two entries with one name are both refused: a client could use
// either, so neither is the tool that was pinned.
//
// Reconcile is the whole catalogue step: call it on each listing (first fetch, every
// list_changed, every restart), then publish exactly Report.Published(). Calls for the
// same server may run at once in several processes sharing a store: a first pin is a
// compare-and-set (Store.PinIfAbsent) and a hold is cleared only as it was read
// (Store.DeleteHoldIf), so they converge on one pin and lose no quarantine (docs/trust.md,
// "Across processes and restarts").
func Reconcile(ctx context.Context, st Store, server string, tools []json.RawMessage, p Policy, at time.Time) (*Report, error) {
	return ReconcileKind(ctx, st, server, KindTool, tools, p, at)
}

// ReconcileKind is Reconcile for one listing of the items of kind k (ParseItem): only
// the pins and holds of that kind are compared, cleared or reported vanished, so the
// tools' reconciliation never touches a prompt's pin, nor the other way round.
func ReconcileKind(ctx context.Context, st Store, server string, k Kind, tools []json.RawMessage, p Policy, at time.Time) (*Report, error) {
	r := &Report{Server: server, Decisions: make([]Decision, len(tools))}
	pins, err := st.Pins(ctx, server)
	if err != nil {
		return nil, fmt.Errorf("toolpin: pins of %s: %w", server, err)
	}
	holds, err := st.Holds(ctx, server)
	if err != nil {
		return nil, fmt.Errorf("toolpin: holds of %s: %w", server, err)
	}
	pins = slices.DeleteFunc(pins, func(x Pin) bool { return !k.Owns(x.Tool) })
	holds = slices.DeleteFunc(holds, func(x Hold) bool { return !k.Owns(x.Tool) })
	pinOf := make(map[string]*Pin, len(pins))
	for i := range pins {
		pinOf[pins[i].Tool] = &pins[i]
	}
	holdOf := make(map[string]*Hold, len(holds))
	for i := range holds {
		holdOf[holds[i].Tool] = &holds[i]
	}

	defs := make([]*Definition, len(tools))
	count := map[string]int{}
	for i, raw := range tools {
		def, err := ParseItem(server, k, raw)
		if err != nil {
			var pe *Error
			name := ""
			if errors.As(err, &pe) {
				name = pe.Tool
			}
			r.Decisions[i] = Decision{Server: server, Tool: name, Verdict: Refused, Reason: "refused: " + err.Error(), Err: err}
			continue
		}
		defs[i] = &def
		count[def.Name]++
	}
	listed := map[string]bool{}
	for i, def := range defs {
		if def == nil {
			continue
		}
		listed[def.Name] = true
		if count[def.Name] > 1 {
			err := &Error{Server: server, Tool: def.Name, Err: fmt.Errorf("the server lists %d tools with this name", count[def.Name])}
			r.Decisions[i] = Decision{Server: server, Tool: def.Name, Verdict: Refused, Definition: def, Reason: "refused: " + err.Error(), Err: err}
			continue
		}
		r.Decisions[i] = Decide(pinOf[def.Name], *def, p)
	}
	for _, pin := range pins {
		if !listed[pin.Tool] {
			r.Vanished = append(r.Vanished, pin.Tool)
		}
	}
	lookalikes := bodyDigests(pins, listed)

	for i := range r.Decisions {
		d := &r.Decisions[i]
		if d.Verdict == New {
			pin := Pin{Server: server, Tool: d.Tool, Digest: d.Definition.Digest, Canonical: d.Definition.Canonical, FirstSeen: at}
			got, inserted, err := st.PinIfAbsent(ctx, pin)
			if err != nil {
				return nil, fmt.Errorf("toolpin: pinning %s %q: %w", server, d.Tool, err)
			}
			if inserted {
				d.Pinned = &pin
				d.LooksLike = lookalikes[bodyDigest(&d.Definition.Value)]
				continue
			}
			// Another process pinned the tool since this one read the pins: this
			// listing is decided against that pin (changed is quarantined), so the two
			// converge on one pin.
			*d = Decide(&got, *d.Definition, p)
		}
		switch d.Verdict {
		case Unchanged:
			if h, ok := holdOf[d.Tool]; ok {
				// Only the hold this reconciliation read: one raised since by another
				// process (another listing) stays.
				if err := st.DeleteHoldIf(ctx, server, d.Tool, h.Digest); err != nil {
					return nil, fmt.Errorf("toolpin: clearing the hold of %s %q: %w", server, d.Tool, err)
				}
			}
		case Pending, Changed:
			if d.Pinned == nil {
				d.LooksLike = lookalikes[bodyDigest(&d.Definition.Value)]
			}
			h := Hold{Server: server, Tool: d.Tool, Reason: d.Hold, State: HoldPending, Digest: d.Definition.Digest,
				Canonical: d.Definition.Canonical, Findings: d.Findings, FirstSeen: at, LastSeen: at}
			if d.Pinned != nil {
				h.PinnedDigest = d.Pinned.Digest
			}
			raised := true
			if old, ok := holdOf[d.Tool]; ok && old.Digest == h.Digest {
				h.State, h.FirstSeen, h.DecidedBy, h.DecidedAt = old.State, old.FirstSeen, old.DecidedBy, old.DecidedAt
				raised = false
			}
			if err := st.PutHold(ctx, h); err != nil {
				return nil, fmt.Errorf("toolpin: holding %s %q: %w", server, d.Tool, err)
			}
			if raised {
				r.Raised = append(r.Raised, h)
			}
			if h.State == HoldRejected {
				d.Reason += fmt.Sprintf(" (rejected by %s)", h.DecidedBy)
			}
		}
	}
	for _, h := range holds {
		if !listed[h.Tool] {
			if err := st.DeleteHoldIf(ctx, server, h.Tool, h.Digest); err != nil {
				return nil, fmt.Errorf("toolpin: clearing the hold of %s %q: %w", server, h.Tool, err)
			}
		}
	}
	return r, nil
}

// bodyDigests maps the name-less digest of each vanished pin to its tool.
func bodyDigests(pins []Pin, listed map[string]bool) map[string]string {
	out := map[string]string{}
	for _, p := range pins {
		if listed[p.Tool] {
			continue
		}
		v, err := canonjson.Parse(p.Canonical, canonjson.Limits{MaxBytes: MaxDefinitionBytes, MaxDepth: MaxDepth})
		if err == nil {
			out[bodyDigest(&v)] = p.Tool
		}
	}
	return out
}

// bodyDigest digests a definition without its name.
func bodyDigest(v *canonjson.Value) string {
	w := canonjson.Value{Kind: canonjson.Object}
	for _, m := range v.Members {
		if m.Key != "name" {
			w.Members = append(w.Members, m)
		}
	}
	return Digest(canonjson.Canonical(&w))
}

// ErrNoHold: there is nothing to approve or reject for that tool.
var ErrNoHold = errors.New("toolpin: no held definition for that tool")

// StaleError: the held definition is not the one the decision was made on (the server
// listed another one since). Nothing was changed; show the new hold and decide again.
type StaleError struct {
	Server, Tool string
	Want, Have   string
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("toolpin: %s %q: the held definition is now %s, not %s: review it again", e.Server, e.Tool, e.Have, e.Want)
}

// ApproveHold makes the held definition of (server, tool) with this digest its pin,
// approved by `by` at `at`, and removes the hold. The digest is the one the person was
// shown: approving names exactly what was reviewed, so a definition that changed again
// in the meantime is not approved by accident (*StaleError). Only the CLI and the
// management protocol may call it — never an MCP tool.
func ApproveHold(ctx context.Context, st Store, server, tool, digest, by string, at time.Time) (Pin, error) {
	h, err := heldFor(ctx, st, server, tool, digest, by)
	if err != nil {
		return Pin{}, err
	}
	pin := Pin{Server: server, Tool: tool, Digest: h.Digest, Canonical: h.Canonical, FirstSeen: h.FirstSeen, ApprovedBy: by, ApprovedAt: at}
	if err := st.PutPin(ctx, pin); err != nil {
		return Pin{}, fmt.Errorf("toolpin: approving %s %q: %w", server, tool, err)
	}
	return pin, nil
}

// RejectHold records that `by` refused the held definition with this digest. The tool
// stays hidden (a changed tool keeps its old pin, which the server no longer lists),
// and the same definition is not raised again.
func RejectHold(ctx context.Context, st Store, server, tool, digest, by string, at time.Time) (Hold, error) {
	h, err := heldFor(ctx, st, server, tool, digest, by)
	if err != nil {
		return Hold{}, err
	}
	h.State, h.DecidedBy, h.DecidedAt = HoldRejected, by, at
	if err := st.PutHold(ctx, h); err != nil {
		return Hold{}, fmt.Errorf("toolpin: rejecting %s %q: %w", server, tool, err)
	}
	return h, nil
}

func heldFor(ctx context.Context, st Store, server, tool, digest, by string) (Hold, error) {
	if by == "" {
		return Hold{}, errors.New("toolpin: a decision must name who made it")
	}
	h, ok, err := st.Hold(ctx, server, tool)
	if err != nil {
		return Hold{}, fmt.Errorf("toolpin: hold of %s %q: %w", server, tool, err)
	}
	if !ok {
		return Hold{}, fmt.Errorf("%w (%s %q)", ErrNoHold, server, tool)
	}
	if h.Digest != digest {
		return Hold{}, &StaleError{Server: server, Tool: tool, Want: digest, Have: h.Digest}
	}
	return h, nil
}
