package metrics

import (
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// UpstreamState is one installed server's state as the host reports it.
type UpstreamState struct {
	// Server is the installed server's name (bounded by what the owner installed).
	Server string
	// State is its lifecycle state ("starting", "ready", "backoff", "failed", …).
	State string
	// Restarts counts the times the host restarted it since this process started.
	Restarts uint64
}

// Upstreams reports every installed server's state (UpstreamTable.States). It is
// called at scrape time, so it must be cheap and must not block on a server.
type Upstreams func() []UpstreamState

var (
	upstreamStateDesc = prometheus.NewDesc("toolgate_upstream_state",
		"1 for each installed server's current lifecycle state.", []string{"server", "state"}, nil)
	upstreamRestartsDesc = prometheus.NewDesc("toolgate_upstream_restarts_total",
		"Restarts of each installed server since this process started.", []string{"server"}, nil)
)

// upstreamCollector turns the Upstreams set into metrics at scrape time.
type upstreamCollector struct{ m *Metrics }

func (c upstreamCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- upstreamStateDesc
	ch <- upstreamRestartsDesc
}

func (c upstreamCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.m.upstreams.Load()
	if f == nil {
		return
	}
	seen := map[string]bool{}
	for _, u := range (*f)() {
		if seen[u.Server] {
			continue // one series per server, whatever the source repeats
		}
		seen[u.Server] = true
		ch <- prometheus.MustNewConstMetric(upstreamStateDesc, prometheus.GaugeValue, 1, u.Server, u.State)
		ch <- prometheus.MustNewConstMetric(upstreamRestartsDesc, prometheus.CounterValue, float64(u.Restarts), u.Server)
	}
}

// SetUpstreams sets the source of toolgate_upstream_state and
// toolgate_upstream_restarts_total; the last call wins. Until something calls it (the
// app, from the host's events: UpstreamTable) neither metric has a series.
func (m *Metrics) SetUpstreams(f Upstreams) {
	if m != nil && f != nil {
		m.upstreams.Store(&f)
	}
}

// UpstreamTable is every installed server's last reported state and its restarts,
// kept from the host's events as they are delivered (Transition, Reset, Remove), so
// that a scrape reads this table under its own leaf lock and never asks the host,
// whose locks are taken around a server's I/O. The zero value is not usable; call
// NewUpstreamTable. Its methods are safe for concurrent use.
type UpstreamTable struct {
	mu      sync.Mutex // a leaf: held for map updates only
	servers map[string]*UpstreamState
}

// NewUpstreamTable returns an empty table.
func NewUpstreamTable() *UpstreamTable {
	return &UpstreamTable{servers: map[string]*UpstreamState{}}
}

// Transition records that server entered state; restarted counts one restart
// (the host's transition into "restarting": between two connections).
func (t *UpstreamTable) Transition(server, state string, restarted bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	u := t.servers[server]
	if u == nil {
		u = &UpstreamState{Server: server}
		t.servers[server] = u
	}
	u.State = state
	if restarted {
		u.Restarts++
	}
}

// Reset makes the table hold exactly the servers of a full snapshot (server name →
// state), as when a watcher resynchronises: the restarts of servers still installed
// are kept.
func (t *UpstreamTable) Reset(states map[string]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name := range t.servers {
		if _, ok := states[name]; !ok {
			delete(t.servers, name)
		}
	}
	for name, st := range states {
		u := t.servers[name]
		if u == nil {
			u = &UpstreamState{Server: name}
			t.servers[name] = u
		}
		u.State = st
	}
}

// Remove forgets an uninstalled server: its series go with it.
func (t *UpstreamTable) Remove(server string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.servers, server)
}

// States is an Upstreams over the table, by server name.
func (t *UpstreamTable) States() []UpstreamState {
	t.mu.Lock()
	out := make([]UpstreamState, 0, len(t.servers))
	for _, u := range t.servers {
		out = append(out, *u)
	}
	t.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Server < out[j].Server })
	return out
}
