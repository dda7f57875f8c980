package host

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"time"
)

// Options configures a [Host]. Every zero field means the documented default
// (docs/host.md, "Timings and limits"); durations that can be switched off say so.
type Options struct {
	// Dialer opens upstream connections. Required.
	Dialer Dialer
	// Observer receives every server, state and catalogue change; nil discards them.
	Observer Observer
	// Catalogs persists catalogues; nil keeps them in memory only.
	Catalogs CatalogStore
	// Logger receives failures that reach no caller (a catalogue save, a close error);
	// nil discards.
	Logger *slog.Logger
	// Servers are installed by New, as by Install (required ones start at once).
	Servers []Definition
	// Notifications receives what an upstream tells its client outside any call and
	// outside the catalogue (notifications/resources/updated, …): the server, the
	// caller session of the connection ("" for a shared one), the method and params.
	// It is called on the connection's notification goroutine and must return at
	// once; nil drops them (docs/host.md, "Resource updates").
	Notifications func(server, sessionKey, method string, params json.RawMessage)

	// IdleTimeout stops a shared connection after this long with no call in flight and
	// none finished (default 10 min; negative: never). Activity is checked every
	// IdleTimeout/8, so the stop comes up to that much later. Required servers and
	// servers with an open per-session connection are never idle.
	IdleTimeout time.Duration
	// StartTimeout bounds one dial (process start + handshake) and how long a call
	// waits for a start (default 30 s).
	StartTimeout time.Duration
	// StopTimeout bounds one Session.Close (default 10 s).
	StopTimeout time.Duration
	// MaxSessions bounds the per-session connections of one "session" server
	// (default 32).
	MaxSessions int

	Health  HealthPolicy
	Restart RestartPolicy
	Catalog CatalogPolicy
}

// HealthPolicy is how live connections are checked.
type HealthPolicy struct {
	// Interval between pings of one connection (default 30 s; negative: no pings).
	Interval time.Duration
	// Timeout of one ping; no answer within it is a failure (default 10 s).
	Timeout time.Duration
	// Slow is the answer time above which a ping makes the server degraded
	// (default 2 s).
	Slow time.Duration
	// Failures consecutive failed pings restart the connection (default 3).
	Failures int
}

// RestartPolicy is the backoff between start attempts and the crash-loop circuit.
type RestartPolicy struct {
	// InitialInterval, Multiplier, MaxInterval and Jitter shape the exponential backoff
	// between a failure and the next start (defaults 500 ms, ×2, 30 s, ±50 %); the
	// backoff is reset once a connection stayed up for Window.
	InitialInterval time.Duration
	Multiplier      float64
	MaxInterval     time.Duration
	Jitter          float64
	// Threshold failures (crashes, failed starts, health restarts) within Window, or
	// Threshold failed starts in a row, open the circuit (defaults 5, 60 s).
	Threshold int
	Window    time.Duration
	// CooldownInitial and CooldownMax bound the circuit's cool-down before each
	// half-open probe; it doubles after every failed probe (defaults 30 s, 10 min,
	// jitter ±20 %).
	CooldownInitial time.Duration
	CooldownMax     time.Duration
}

// CatalogPolicy bounds catalogues and their refreshes.
type CatalogPolicy struct {
	// MaxItems bounds the items (tools + resources + templates + prompts) kept per
	// server (default 4096); beyond it the catalogue is marked truncated.
	MaxItems int
	// MaxBytes bounds the bytes of those items per server (default 8 MiB).
	MaxBytes int
	// MaxPages bounds the pages fetched per list (default 256).
	MaxPages int
	// Debounce delays a refresh after a list_changed notification, so a burst of them
	// costs one refresh (default 250 ms).
	Debounce time.Duration
	// Timeout bounds one whole refresh (default 30 s).
	Timeout time.Duration
}

// Defaults.
const (
	DefaultIdleTimeout    = 10 * time.Minute
	DefaultStartTimeout   = 30 * time.Second
	DefaultStopTimeout    = 10 * time.Second
	DefaultMaxSessions    = 32
	DefaultHealthInterval = 30 * time.Second
	DefaultHealthTimeout  = 10 * time.Second
	DefaultHealthSlow     = 2 * time.Second
	DefaultHealthFailures = 3

	DefaultRestartInitial   = 500 * time.Millisecond
	DefaultRestartMult      = 2.0
	DefaultRestartMax       = 30 * time.Second
	DefaultRestartJitter    = 0.5
	DefaultCircuitThreshold = 5
	DefaultCircuitWindow    = 60 * time.Second
	DefaultCooldownInitial  = 30 * time.Second
	DefaultCooldownMax      = 10 * time.Minute
	cooldownJitter          = 0.2

	DefaultCatalogMaxItems = 4096
	DefaultCatalogMaxBytes = 8 << 20
	DefaultCatalogMaxPages = 256
	DefaultCatalogDebounce = 250 * time.Millisecond
	DefaultCatalogTimeout  = 30 * time.Second
)

func orDur(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}

func orInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// withDefaults fills zero fields and refuses values that cannot work.
func (o Options) withDefaults() (Options, error) {
	if o.Dialer == nil {
		return o, fmt.Errorf("host: Options.Dialer is required")
	}
	o.IdleTimeout = orDur(o.IdleTimeout, DefaultIdleTimeout)
	o.StartTimeout = orDur(o.StartTimeout, DefaultStartTimeout)
	o.StopTimeout = orDur(o.StopTimeout, DefaultStopTimeout)
	o.MaxSessions = orInt(o.MaxSessions, DefaultMaxSessions)
	h := &o.Health
	h.Interval = orDur(h.Interval, DefaultHealthInterval)
	h.Timeout = orDur(h.Timeout, DefaultHealthTimeout)
	h.Slow = orDur(h.Slow, DefaultHealthSlow)
	h.Failures = orInt(h.Failures, DefaultHealthFailures)
	r := &o.Restart
	r.InitialInterval = orDur(r.InitialInterval, DefaultRestartInitial)
	if r.Multiplier == 0 {
		r.Multiplier = DefaultRestartMult
	}
	r.MaxInterval = orDur(r.MaxInterval, DefaultRestartMax)
	if r.Jitter == 0 {
		r.Jitter = DefaultRestartJitter
	}
	r.Threshold = orInt(r.Threshold, DefaultCircuitThreshold)
	r.Window = orDur(r.Window, DefaultCircuitWindow)
	r.CooldownInitial = orDur(r.CooldownInitial, DefaultCooldownInitial)
	r.CooldownMax = orDur(r.CooldownMax, DefaultCooldownMax)
	c := &o.Catalog
	c.MaxItems = orInt(c.MaxItems, DefaultCatalogMaxItems)
	c.MaxBytes = orInt(c.MaxBytes, DefaultCatalogMaxBytes)
	c.MaxPages = orInt(c.MaxPages, DefaultCatalogMaxPages)
	c.Debounce = orDur(c.Debounce, DefaultCatalogDebounce)
	c.Timeout = orDur(c.Timeout, DefaultCatalogTimeout)

	switch {
	case o.StartTimeout < 0, o.StopTimeout < 0, h.Timeout < 0, h.Slow < 0, c.Debounce < 0, c.Timeout < 0:
		return o, fmt.Errorf("host: negative timeout in Options")
	case o.MaxSessions < 0, h.Failures < 0, r.Threshold < 0, c.MaxItems < 0, c.MaxBytes < 0, c.MaxPages < 0:
		return o, fmt.Errorf("host: negative limit in Options")
	case r.InitialInterval < 0, r.MaxInterval < r.InitialInterval, r.Multiplier < 1, r.Jitter < 0, r.Jitter >= 1:
		return o, fmt.Errorf("host: Options.Restart backoff needs 0 < InitialInterval <= MaxInterval, Multiplier >= 1, 0 <= Jitter < 1")
	case r.Window < 0, r.CooldownInitial < 0, r.CooldownMax < r.CooldownInitial:
		return o, fmt.Errorf("host: Options.Restart circuit needs Window >= 0 and CooldownInitial <= CooldownMax")
	}
	return o, nil
}
