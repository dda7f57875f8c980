package hostrelay

import (
	"errors"
	"log/slog"
	"time"
)

// Defaults of Options and Limits (docs/hostrelay.md, "Bounds").
const (
	DefaultElectTimeout      = 10 * time.Second
	DefaultMaxMessageBytes   = 32 << 20 // twice an upstream message (upstream.DefaultMaxMessageBytes)
	DefaultMaxInFlight       = 128
	DefaultNotificationQueue = 1024
	DefaultWatchQueue        = 256
	DefaultWriteTimeout      = 10 * time.Second
	DefaultMaxClients        = 64
)

// Options configures a [Node]. Zero fields are the documented defaults.
type Options struct {
	// NewHost builds this process's host when it wins the election. Required unless
	// RelayOnly.
	NewHost NewHostFunc
	// Reload runs in this process, when it hosts, for every Upstreams.Reload of any
	// process on the data directory; nil: Reload does nothing.
	Reload ReloadFunc
	// RelayOnly never hosts: with no process hosting, Open and every request fail
	// with ErrNoHost (for commands that must not start upstream servers).
	RelayOnly bool
	// ElectTimeout bounds one election: taking the lock, or reaching the process that
	// holds it (default 10 s).
	ElectTimeout time.Duration
	// Logger receives what reaches no caller (a refused peer, a dropped client); nil
	// discards.
	Logger *slog.Logger
	Limits Limits
}

// Limits bound what one relay connection may cost, on both ends.
type Limits struct {
	// MaxMessageBytes caps one message either way (default 32 MiB). Each end checks
	// what it sends against the other's cap; a longer request fails with
	// *MessageTooLargeError, a longer answer is replaced by that error.
	MaxMessageBytes int
	// MaxInFlight caps the requests one connection has under way (default 128). The
	// client waits for a free slot (bounded by its context); the host refuses more.
	MaxInFlight int
	// NotificationQueue bounds the progress and event notifications waiting to be
	// written to one client (default 1024); when full the oldest is dropped (a dropped
	// event makes the client resync).
	NotificationQueue int
	// WatchQueue bounds the events waiting for one Watcher (default 256); an overflow
	// becomes a Resync.
	WatchQueue int
	// WriteTimeout drops a connection whose other end read nothing for this long while
	// a write waited (default 10 s).
	WriteTimeout time.Duration
	// MaxClients bounds the connections a host accepts at once (default 64).
	MaxClients int
}

func (l Limits) withDefaults() Limits {
	orDefault(&l.MaxMessageBytes, DefaultMaxMessageBytes)
	orDefault(&l.MaxInFlight, DefaultMaxInFlight)
	orDefault(&l.NotificationQueue, DefaultNotificationQueue)
	orDefault(&l.WatchQueue, DefaultWatchQueue)
	orDefault(&l.WriteTimeout, DefaultWriteTimeout)
	orDefault(&l.MaxClients, DefaultMaxClients)
	return l
}

// orDefault sets *v to def unless it is positive.
func orDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

func (o Options) withDefaults() (Options, error) {
	if o.NewHost == nil && !o.RelayOnly {
		return o, errors.New("hostrelay: Options.NewHost is required unless RelayOnly")
	}
	orDefault(&o.ElectTimeout, DefaultElectTimeout)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Limits = o.Limits.withDefaults()
	return o, nil
}
