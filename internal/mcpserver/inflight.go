package mcpserver

import "sync"

// DefaultMaxInFlightPerPrincipal is the default of
// HandlerOptions.MaxInFlightPerPrincipal.
const DefaultMaxInFlightPerPrincipal = 64

// bridgeMaxInFlight caps a bridge's concurrently running requests. A bridge
// serves one harness run; 64 requests at once is far beyond what a harness
// sends (each batch counts once and runs at most batchWorkers calls at a time),
// yet bounds what a misbehaving or hostile client holding the token can pin.
const bridgeMaxInFlight = 64

// inflightLimit counts each principal's requests between authentication and the
// end of their answer. Without it a client with a valid token could hold any
// number of long calls open, each with its goroutines and buffers. A principal
// at its cap is refused (429) in O(1) under a lock held only for the count, so
// it never slows another principal. A nil *inflightLimit admits everything.
type inflightLimit struct {
	max int
	mu  sync.Mutex
	n   map[string]int // principals with a request in flight; no zero entries
}

func newInflightLimit(max int) *inflightLimit {
	return &inflightLimit{max: max, n: map[string]int{}}
}

// acquire admits one request of principal unless it already has max running.
func (l *inflightLimit) acquire(principal string) bool {
	if l == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[principal] >= l.max {
		return false
	}
	l.n[principal]++
	return true
}

// release ends one admitted request of principal.
func (l *inflightLimit) release(principal string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[principal] <= 1 {
		delete(l.n, principal)
		return
	}
	l.n[principal]--
}

// inFlight returns principal's running requests (for tests).
func (l *inflightLimit) inFlight(principal string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[principal]
}
