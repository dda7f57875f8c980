package metrics

import "github.com/prometheus/client_golang/prometheus"

// UpstreamState is one installed server's state as the host reports it.
type UpstreamState struct {
	// Server is the installed server's name (bounded by what the owner installed).
	Server string
	// State is its lifecycle state ("starting", "ready", "backoff", "failed", …).
	State string
	// Restarts counts the times the host restarted it since this process started.
	Restarts uint64
}

// Upstreams reports every installed server's state; the host implements it. It is
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
// host, once installed servers run in toolgate serve) neither metric has a series.
func (m *Metrics) SetUpstreams(f Upstreams) {
	if m != nil && f != nil {
		m.upstreams.Store(&f)
	}
}
