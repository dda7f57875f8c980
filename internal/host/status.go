package host

import (
	"sort"
	"time"
)

// Status is one server's runtime and health, as mcp/list (runtime) and
// mcp/server/details (health) report them.
type Status struct {
	Name        string
	Fingerprint string
	Isolation   Isolation
	Required    bool
	Enabled     bool

	State State
	Since time.Time // when it entered State
	// Live is true when a connection answers calls (ready or degraded).
	Live bool
	// LastSeenAt is when the upstream last answered (a start, a ping, or a call, which
	// is dated by the activity check: up to IdleTimeout/8 early, never late); zero if it
	// never did in this process.
	LastSeenAt time.Time
	Reason     Reason // why it entered State
	LastError  string // the last failure's message, kept after recovery

	Retry   RetryInfo
	Catalog CatalogStatus

	Connections int // open connections (1 at most for a shared server)
	InFlight    int // calls in flight over them
	// StderrTail is the live "" connection's stderr tail, or the last ended one's.
	StderrTail string
}

// RetryInfo is the restart policy's view of a server.
type RetryInfo struct {
	// Attempts counts failures since the backoff was last reset (a stable run, a probe
	// that succeeded, a restart, a configuration change).
	Attempts int
	// Failures counts failures within RestartPolicy.Window.
	Failures int
	// NextAttempt is when the next automatic start is due (backoff or probe); zero
	// when none is scheduled.
	NextAttempt time.Time
	// CircuitOpen is true in state failed: calls are refused until the probe.
	CircuitOpen bool
}

// CatalogStatus summarizes a server's catalogue.
type CatalogStatus struct {
	Version   uint64
	Digest    string
	FetchedAt time.Time
	Counts    Counts
	Truncated bool
	// Error is the last refresh's or save's failure, if it had one.
	Error string
}

// Snapshot is every installed server's status at one snapshot version.
type Snapshot struct {
	// Version is the Seq of the latest Observer event when the snapshot was taken;
	// each status reflects at least every event up to it.
	Version uint64
	At      time.Time
	Servers []Status // by name
}

// Status reports one server; ok is false when it is not installed.
func (h *Host) Status(name string) (st Status, ok bool) {
	r := h.lookup(name)
	if r == nil {
		return Status{}, false
	}
	return r.status(), true
}

// Snapshot reports every installed server.
func (h *Host) Snapshot() Snapshot {
	v := h.ev.version() // first: every status below is at least this new
	snap := Snapshot{Version: v, At: now()}
	for _, r := range *h.servers.Load() {
		snap.Servers = append(snap.Servers, r.status())
	}
	sort.Slice(snap.Servers, func(i, j int) bool { return snap.Servers[i].Name < snap.Servers[j].Name })
	return snap
}

// status copies r's state under its lock; the stderr tail is read after, from the
// session (memory only, by contract).
func (r *runtime) status() Status {
	r.mu.Lock()
	st := Status{
		Name: r.name, Fingerprint: r.def.Fingerprint, Isolation: r.def.Isolation,
		Required: r.def.Required, Enabled: !r.def.Disabled,
		State: r.state, Since: r.since, Live: r.state.Live(), Reason: r.reason,
		Retry: RetryInfo{
			Attempts: r.attempts, NextAttempt: r.nextAttemptLocked(),
			CircuitOpen: r.block == blockCircuit,
		},
		StderrTail: r.stderr,
	}
	t := now()
	for _, f := range r.failures {
		if t.Sub(f) < r.h.opts.Restart.Window {
			st.Retry.Failures++
		}
	}
	if r.lastErr != nil {
		st.LastError = r.lastErr.Error()
	}
	if r.catErr != nil {
		st.Catalog.Error = r.catErr.Error()
	}
	var tailFrom Session
	for _, s := range r.slots {
		if s.phase != phaseLive {
			continue
		}
		st.Connections++
		st.InFlight += s.conn.inflight()
		if s.key == "" || tailFrom == nil {
			tailFrom = s.conn.sess
		}
	}
	r.mu.Unlock()

	if ls := r.lastSeen.Load(); ls != 0 {
		st.LastSeenAt = time.Unix(0, ls)
	}
	if c := r.cat.Load(); c != nil {
		st.Catalog.Version, st.Catalog.Digest, st.Catalog.FetchedAt = c.Version, c.Digest, c.FetchedAt
		st.Catalog.Counts, st.Catalog.Truncated = c.Counts(), c.Truncated
	}
	if tailFrom != nil {
		if tail := tailFrom.StderrTail(); tail != "" {
			st.StderrTail = tail
		}
	}
	return st
}
