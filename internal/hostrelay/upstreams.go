package hostrelay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/internal/host"
)

// Upstreams is what the rest of toolgate needs from the upstream servers of its data
// directory: calls, catalogues, statuses, the session end, a restart, a reload of the
// persisted definitions, and the host's events. The app holds a value of it without
// knowing whether this process hosts the servers ([Local], or a [Node] that won the
// election) or relays to the process that does (a [Node] that lost it).
//
// Results and params are the upstream's bytes, unchanged either way. Methods are safe
// for concurrent use.
type Upstreams interface {
	Requests
	// Watch delivers the host's events to w until stop is called (see [Watcher]).
	Watch(w Watcher) (stop func())
	// Close releases what this value holds: a hosting process stops its upstream
	// servers (host.Host.Shutdown) after it has dropped the processes relaying to it.
	Close(ctx context.Context) error
}

// Requests are the requests every way to the host answers: the host itself, and the
// relay to it.
type Requests interface {
	// Call is host.Host.Call: it returns the upstream's result bytes unchanged, a
	// *host.ServerError when the host decided (errors.Is with host.ErrDisabled …), the
	// upstream's JSON-RPC error as *upstream.RPCError, or ctx's error. Relayed, a call
	// under way when the hosting process went away fails at once with a
	// *[HostGoneError]; opts.Progress is called in order, before Call returns.
	Call(ctx context.Context, server, method string, params json.RawMessage, opts host.CallOptions) (json.RawMessage, error)
	// Catalog is host.Host.Catalog: the last catalogue, never waiting for the upstream.
	Catalog(ctx context.Context, server string) (host.Catalog, bool, error)
	// RefreshCatalog is host.Host.RefreshCatalog: the catalogue can come with an error.
	RefreshCatalog(ctx context.Context, server string) (host.Catalog, error)
	// Status is host.Host.Status.
	Status(ctx context.Context, server string) (host.Status, bool, error)
	// Snapshot is host.Host.Snapshot.
	Snapshot(ctx context.Context) (host.Snapshot, error)
	// Restart is host.Host.Restart.
	Restart(ctx context.Context, server string) error
	// Warm is host.Host.Warm: start a shared server that is not running, without
	// waiting for it. Best effort: a host of an earlier release that does not know
	// the request answers an error, which the caller ignores.
	Warm(ctx context.Context, server string) error
	// EndSession is host.Host.EndSession: the caller session key ended.
	EndSession(ctx context.Context, key string) error
	// Reload makes the hosting process re-read the persisted definitions (the
	// integrator's [ReloadFunc]), after this process changed them in the store.
	Reload(ctx context.Context) error
}

// Watcher receives the host's events: a host.Observer, plus Resync.
//
// Resync comes first, with the snapshot the events that follow build on, and again
// whenever events may have been missed: this watcher's queue overflowed, the relay
// dropped events for a process that did not read them, or another process became the
// host (whose event sequence starts afresh). A watcher replaces what it knows with
// snap; every event delivered after it has Seq > snap.Version.
//
// Methods are called from one goroutine per watcher, in order, never with a lock of
// this package held; a slow watcher delays only its own events (its queue is bounded:
// an overflow becomes a Resync).
type Watcher interface {
	host.Observer
	Resync(snap host.Snapshot)
}

// NewHostFunc builds this process's host when it is to host the data directory's
// upstream servers: a *host.Host over the persisted definitions, whose
// host.Options.Observer must be obs (or forward every event to it). ctx bounds the
// construction only.
type NewHostFunc func(ctx context.Context, obs host.Observer) (*host.Host, error)

// ReloadFunc makes h match the persisted definitions (install, update, remove and
// enable or disable what changed). It runs in the hosting process when any process
// calls Upstreams.Reload.
type ReloadFunc func(ctx context.Context, h *host.Host) error

// Errors of the relay. Errors the host or the upstream produced keep their own types
// across the relay (*host.ServerError, *upstream.RPCError).
var (
	// ErrHostGone: the process hosting the upstream servers went away (exited, was
	// killed, dropped this process) while the request was under way. The request may
	// or may not have been carried out. The next request elects a new host.
	ErrHostGone = errors.New("hostrelay: the process hosting the upstream servers went away")
	// ErrNoHost: Options.RelayOnly, and no process hosts the data directory's
	// upstream servers.
	ErrNoHost = errors.New("hostrelay: no process hosts this data directory's upstream servers")
	// ErrUnreachable: a process holds the data directory's upstream.lock but does not
	// answer on its socket within Options.ElectTimeout.
	ErrUnreachable = errors.New("hostrelay: the process hosting this data directory's upstream servers does not answer")
	// ErrClosed: Close was called.
	ErrClosed = errors.New("hostrelay: closed")
)

// HostGoneError is the error of a relayed request whose host went away. Sent is false
// when the request had not been handed to the host, so it certainly did not run (a
// [Node] retries those itself on the next host).
type HostGoneError struct {
	Op      string // "call", "catalog", …
	Server  string // the request's server, when it has one
	HostPID int
	Sent    bool
	Err     error // how the connection ended
}

func (e *HostGoneError) Error() string {
	s := "hostrelay: " + e.Op
	if e.Server != "" {
		s += fmt.Sprintf(" %q", e.Server)
	}
	s += fmt.Sprintf(": the process hosting the upstream servers (pid %d) went away", e.HostPID)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is makes errors.Is(err, ErrHostGone) true.
func (e *HostGoneError) Is(target error) bool { return target == ErrHostGone }

func (e *HostGoneError) Unwrap() error { return e.Err }

// UnreachableError names the process holding the lock that does not answer.
type UnreachableError struct {
	Dir       string
	HolderPID int // from upstream.lock; 0 if it could not be read
	Err       error
}

func (e *UnreachableError) Error() string {
	who := "another process"
	if e.HolderPID > 0 {
		who = fmt.Sprintf("process %d", e.HolderPID)
	}
	return fmt.Sprintf("hostrelay: %s holds %s/%s but does not answer on its socket: %v", who, e.Dir, lockName, e.Err)
}

// Is makes errors.Is(err, ErrUnreachable) true.
func (e *UnreachableError) Is(target error) bool { return target == ErrUnreachable }

func (e *UnreachableError) Unwrap() error { return e.Err }

// PeerError reports the other end of the relay socket running as another user, or in
// another user namespace (as bash's sandbox does): the host refuses such a client, and
// a client refuses such a host.
type PeerError struct {
	PID, UID    int
	WantUID     int
	OtherUserNS bool
}

func (e *PeerError) Error() string {
	if e.OtherUserNS {
		return fmt.Sprintf("hostrelay: the relay socket's other end (pid %d) is in another user namespace", e.PID)
	}
	return fmt.Sprintf("hostrelay: the relay socket's other end (pid %d) runs as uid %d, not uid %d", e.PID, e.UID, e.WantUID)
}

// ProtocolError reports a host that speaks another version of the relay protocol (a
// toolgate of another release serves this data directory: restart it).
type ProtocolError struct {
	Ours, Theirs int
	HostPID      int
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("hostrelay: the process hosting the upstream servers (pid %d) speaks relay protocol %d, this toolgate %d: restart it with this release",
		e.HostPID, e.Theirs, e.Ours)
}

// MessageTooLargeError reports a request or answer over the relay's message cap
// (Limits.MaxMessageBytes of either side).
type MessageTooLargeError struct {
	Size, Limit int
}

func (e *MessageTooLargeError) Error() string {
	return fmt.Sprintf("hostrelay: message of %d bytes exceeds the relay's cap of %d", e.Size, e.Limit)
}

// RemoteError is an error the hosting process reported that has no more precise type
// on this side (its message is kept).
type RemoteError struct {
	Message string
}

func (e *RemoteError) Error() string { return e.Message }
