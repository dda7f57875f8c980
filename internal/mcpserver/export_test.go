package mcpserver

import "fmt"

// CheckSessionBookkeeping verifies a Handler's registry against its sessions:
// every principal's count is its live sessions (when no initialize is opening a
// Turn), no principal is remembered without one, and the idle lists hold
// exactly the idle sessions, in idle order. Tests call it between steps.
func CheckSessionBookkeeping(h *Handler) error { return checkRegistry(h.reg) }

// CheckBridgeSessionBookkeeping is CheckSessionBookkeeping for a Bridge.
func CheckBridgeSessionBookkeeping(b *Bridge) error { return checkRegistry(b.store.reg) }

func checkRegistry(g *registry) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	perPrincipal := map[string]int{}
	idle := 0
	for id, s := range g.sessions {
		sl := s.slot
		if sl == nil || sl.gone || s.id != id {
			return fmt.Errorf("session %s: registered but gone or without a slot", id)
		}
		if g.owners[sl.principal] != sl.owner {
			return fmt.Errorf("session %s: its principal's entry is not its owner", id)
		}
		perPrincipal[sl.principal]++
		if (sl.busy == 0) != (sl.inIdle != nil) || (sl.inIdle != nil) != (sl.inOwnIdle != nil) {
			return fmt.Errorf("session %s: busy %d but idle-list membership %v/%v", id, sl.busy, sl.inIdle != nil, sl.inOwnIdle != nil)
		}
		if sl.busy == 0 {
			idle++
		}
	}
	if g.reserved == 0 {
		if len(g.owners) != len(perPrincipal) {
			return fmt.Errorf("%d principals remembered, %d hold sessions", len(g.owners), len(perPrincipal))
		}
		for p, own := range g.owners {
			if own.live != perPrincipal[p] {
				return fmt.Errorf("principal %q: count %d, sessions %d", p, own.live, perPrincipal[p])
			}
			if own.live > g.opts.MaxSessionsPerPrincipal {
				return fmt.Errorf("principal %q: %d sessions over the quota %d", p, own.live, g.opts.MaxSessionsPerPrincipal)
			}
		}
	}
	if len(g.sessions) > g.opts.MaxSessions {
		return fmt.Errorf("%d sessions over the cap %d", len(g.sessions), g.opts.MaxSessions)
	}
	if g.idle.Len() != idle {
		return fmt.Errorf("idle list holds %d, %d sessions are idle", g.idle.Len(), idle)
	}
	ownIdle := 0
	for _, own := range g.owners {
		ownIdle += own.idle.Len()
	}
	if ownIdle != idle {
		return fmt.Errorf("principals' idle lists hold %d, %d sessions are idle", ownIdle, idle)
	}
	for e := g.idle.Front(); e != nil && e.Next() != nil; e = e.Next() {
		if e.Value.(*httpSession).slot.idleSince.After(e.Next().Value.(*httpSession).slot.idleSince) {
			return fmt.Errorf("idle list out of order")
		}
	}
	return nil
}

// GuardWithBodyTimeout is Guard with a body timeout other than DefaultBodyTimeout.
var GuardWithBodyTimeout = guardWith

// InFlight returns principal's requests a Handler counts as running.
func InFlight(h *Handler, principal string) int { return h.core.inflight.inFlight(principal) }

// BridgeInFlight returns the requests a Bridge counts as running.
func BridgeInFlight(b *Bridge) int { return b.core.inflight.inFlight("") }

// BridgeMaxInFlight is the bridge's fixed cap on running requests.
const BridgeMaxInFlight = bridgeMaxInFlight
