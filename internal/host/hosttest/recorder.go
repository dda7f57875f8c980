package hosttest

import (
	"context"
	"fmt"
	"sync"

	"github.com/toolgate/toolgate/internal/host"
)

// Edge is one state transition.
type Edge struct{ From, To host.State }

func (e Edge) String() string { return string(e.From) + " → " + string(e.To) }

// Recorder is a host.Observer that keeps every event and checks, as they arrive, what
// the host promises about them: Seq grows by exactly one per event, each server's
// transitions chain (From is the previous To), every transition is in
// host.Transitions, and states are among the ten.
type Recorder struct {
	mu         sync.Mutex
	lastSeq    uint64
	last       map[string]host.State
	states     []host.StateEvent
	catalogs   []host.CatalogEvent
	servers    []host.ServerEvent
	violations []string
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{last: map[string]host.State{}} }

func (r *Recorder) seqLocked(seq uint64, what string) {
	if seq != r.lastSeq+1 {
		r.violations = append(r.violations, fmt.Sprintf("%s: seq %d after %d", what, seq, r.lastSeq))
	}
	r.lastSeq = seq
}

// ServerChanged implements host.Observer.
func (r *Recorder) ServerChanged(e host.ServerEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seqLocked(e.Seq, "server "+e.Server)
	r.servers = append(r.servers, e)
	switch e.Change {
	case host.ChangeInstalled:
		delete(r.last, e.Server) // a new installation starts its own chain
	}
}

// StateChanged implements host.Observer.
func (r *Recorder) StateChanged(e host.StateEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seqLocked(e.Seq, "state "+e.Server)
	if !e.From.Valid() || !e.To.Valid() {
		r.violations = append(r.violations, fmt.Sprintf("%s: invalid state in %s → %s", e.Server, e.From, e.To))
	}
	if !host.Allowed(e.From, e.To) {
		r.violations = append(r.violations, fmt.Sprintf("%s: undocumented transition %s → %s (%s)", e.Server, e.From, e.To, e.Reason))
	}
	if prev, ok := r.last[e.Server]; ok && prev != e.From {
		r.violations = append(r.violations, fmt.Sprintf("%s: transition from %s but the last one went to %s", e.Server, e.From, prev))
	} else if !ok && e.From != host.StateNotStarted && e.From != host.StateDisabled {
		r.violations = append(r.violations, fmt.Sprintf("%s: first transition is from %s", e.Server, e.From))
	}
	r.last[e.Server] = e.To
	r.states = append(r.states, e)
}

// CatalogChanged implements host.Observer.
func (r *Recorder) CatalogChanged(e host.CatalogEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seqLocked(e.Seq, "catalog "+e.Server)
	r.catalogs = append(r.catalogs, e)
}

// Violations lists every broken promise seen so far.
func (r *Recorder) Violations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.violations...)
}

// States returns server's state events in order.
func (r *Recorder) States(server string) []host.StateEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return ofServer(r.states, server, func(e host.StateEvent) string { return e.Server })
}

func ofServer[E any](events []E, server string, name func(E) string) []E {
	var out []E
	for _, e := range events {
		if name(e) == server {
			out = append(out, e)
		}
	}
	return out
}

// Path is server's sequence of states: the first From, then every To.
func (r *Recorder) Path(server string) []host.State {
	var out []host.State
	for i, e := range r.States(server) {
		if i == 0 {
			out = append(out, e.From)
		}
		out = append(out, e.To)
	}
	return out
}

// Edges counts every transition seen, for any server.
func (r *Recorder) Edges() map[Edge]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[Edge]int{}
	for _, e := range r.states {
		out[Edge{e.From, e.To}]++
	}
	return out
}

// Catalogs returns server's catalogue events in order.
func (r *Recorder) Catalogs(server string) []host.CatalogEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return ofServer(r.catalogs, server, func(e host.CatalogEvent) string { return e.Server })
}

// Servers returns every installation event in order.
func (r *Recorder) Servers() []host.ServerEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]host.ServerEvent(nil), r.servers...)
}

// LastSeq is the Seq of the last event received.
func (r *Recorder) LastSeq() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastSeq
}

// Catalogs is an in-memory host.CatalogStore. It keeps copies, so a test can tell
// what was persisted from what the host holds.
type Catalogs struct {
	mu                   sync.Mutex
	m                    map[string]host.Catalog
	saves, loads, delete int
	failSave             error
}

// NewCatalogs returns an empty store.
func NewCatalogs() *Catalogs { return &Catalogs{m: map[string]host.Catalog{}} }

// LoadCatalog implements host.CatalogStore.
func (c *Catalogs) LoadCatalog(_ context.Context, server string) (host.Catalog, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loads++
	v, ok := c.m[server]
	return v, ok, nil
}

// SaveCatalog implements host.CatalogStore.
func (c *Catalogs) SaveCatalog(_ context.Context, server string, v host.Catalog) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failSave != nil {
		return c.failSave
	}
	c.saves++
	c.m[server] = v
	return nil
}

// DeleteCatalog implements host.CatalogStore.
func (c *Catalogs) DeleteCatalog(_ context.Context, server string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.delete++
	delete(c.m, server)
	return nil
}

// Get returns what is stored for server.
func (c *Catalogs) Get(server string) (host.Catalog, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[server]
	return v, ok
}

// Saves is how many saves succeeded.
func (c *Catalogs) Saves() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.saves
}

// FailSaves makes later saves fail with err (nil: succeed again).
func (c *Catalogs) FailSaves(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failSave = err
}

var (
	_ host.Observer     = (*Recorder)(nil)
	_ host.CatalogStore = (*Catalogs)(nil)
)
