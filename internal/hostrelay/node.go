package hostrelay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolgate/toolgate/internal/datadir"
	"github.com/toolgate/toolgate/internal/host"
)

// Node is one toolgate process's share of a data directory's upstream servers: it
// hosts them (it won the election: it holds upstream.lock, runs its own *host.Host and
// serves the relay socket) or relays every request to the process that does. When
// that process goes away, the next request (or, while watchers are registered, the
// Node at once) elects again: one of the processes left takes the lock and hosts, the
// others relay to it. A Node that hosts keeps hosting until Close.
//
// docs/hostrelay.md describes the election, the socket, the protocol, the bounds and
// the failure modes.
type Node struct {
	dir   string // resolved
	dirfd int
	addr  string
	opts  Options
	log   *slog.Logger
	ctx   context.Context // ended by Close: bounds elections
	stop  context.CancelFunc

	mu       sync.Mutex
	closed   bool
	local    *Local // while hosting
	lockf    *os.File
	srv      *server
	cl       *client // while relaying (may have ended)
	elect    *election
	unsink   func()  // removes the Node's sink from its current source
	sinkGen  uint64  // bumped by each resink: a late subscription of an older one is dropped
	watchers sinkSet // of *watchq
	retrying bool    // a background election loop runs
	wg       sync.WaitGroup
	hostPID  atomic.Int64
	nElect   atomic.Int64
}

// closeLate bounds the shutdown of a host this Node built but can no longer use (it
// was closed meanwhile, or its socket could not be served).
const closeLate = 30 * time.Second

type election struct {
	done chan struct{}
	err  error
}

var _ Upstreams = (*Node)(nil)

// Open joins the upstream servers of the data directory dir: it prepares dir (it
// must be private: internal/datadir) and runs the first election, so on return this
// process either hosts or relays. The election is bounded by opts.ElectTimeout and
// ctx.
func Open(ctx context.Context, dir string, opts Options) (*Node, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	real, err := datadir.Prepare(dir)
	if err != nil {
		return nil, err
	}
	fd, err := openDir(real)
	if err != nil {
		return nil, err
	}
	addr, err := socketAddr(real, fd)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	n := &Node{dir: real, dirfd: fd, addr: addr, opts: o, log: o.Logger}
	n.ctx, n.stop = context.WithCancel(context.Background())
	n.mu.Lock()
	e := n.startElectionLocked()
	n.mu.Unlock()
	select {
	case <-e.done:
		err = e.err
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		n.Close(context.Background())
		return nil, err
	}
	return n, nil
}

// Stats is what a Node reports about its part in the election and, while hosting,
// about the processes relaying to it.
type Stats struct {
	Hosting bool
	// HostPID is the hosting process (this one while Hosting); 0 when none is known.
	HostPID   int
	Elections int64
	// Served by this process while it hosts:
	Clients         int
	RefusedPeers    uint64 // connections refused: another uid, too many clients
	DroppedClients  uint64 // clients dropped: they read nothing for WriteTimeout, or sent an oversized line
	DroppedProgress uint64 // progress notifications dropped for clients that did not read them
	DroppedEvents   uint64 // events dropped for clients that did not read them (each followed by a resync)
	RefusedCalls    uint64 // requests refused: more than MaxInFlight under way on one connection
}

// Stats reports the Node's current state.
func (n *Node) Stats() Stats {
	n.mu.Lock()
	srv := n.srv
	st := Stats{Hosting: n.local != nil, HostPID: int(n.hostPID.Load()), Elections: n.nElect.Load()}
	n.mu.Unlock()
	if srv != nil {
		st.Clients = srv.clients()
		st.RefusedPeers = srv.refusedPeers.Load()
		st.DroppedClients = srv.droppedClients.Load()
		st.DroppedProgress = srv.droppedProgress.Load()
		st.DroppedEvents = srv.droppedEvents.Load()
		st.RefusedCalls = srv.refusedCalls.Load()
	}
	return st
}

func (n *Node) startElectionLocked() *election {
	if n.elect == nil {
		e := &election{done: make(chan struct{})}
		n.elect = e
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			err := n.runElection()
			n.mu.Lock()
			n.elect = nil
			e.err = err
			n.mu.Unlock()
			close(e.done)
		}()
	}
	return n.elect
}

// runElection takes the lock and hosts, or reaches the process that holds it. One runs
// at a time per Node; across processes the flock decides: one wins, the others relay.
func (n *Node) runElection() error {
	n.nElect.Add(1)
	ctx, cancel := context.WithTimeout(n.ctx, n.opts.ElectTimeout)
	defer cancel()
	wait := 2 * time.Millisecond
	var last error
	for {
		if !n.opts.RelayOnly {
			f, won, err := tryLock(n.dir)
			if err != nil {
				return err
			}
			if won {
				return n.becomeHost(ctx, f)
			}
		}
		cl, err := dialClient(ctx, n.addr, n.opts.Limits, n.log, n.clientEnded)
		if err == nil {
			return n.adopt(cl)
		}
		var pe *PeerError
		var pre *ProtocolError
		if errors.As(err, &pe) || errors.As(err, &pre) || errors.Is(err, errors.ErrUnsupported) {
			return err // waiting changes none of these
		}
		last = err
		if n.opts.RelayOnly && notListening(err) {
			if free, ferr := lockFree(n.dir); ferr == nil && free {
				return ErrNoHost
			}
		}
		// The holder binds the socket right after it built its host: wait for it.
		t := time.NewTimer(wait/2 + rand.N(wait))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			if n.ctx.Err() != nil {
				return ErrClosed
			}
			return &UnreachableError{Dir: n.dir, HolderPID: holderPID(n.dir), Err: last}
		}
		wait = min(wait*2, 100*time.Millisecond)
	}
}

// notListening reports a dial that found no listener (no socket file yet, or a stale
// one).
func notListening(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}

// becomeHost runs with the lock held: it builds this process's host, binds the socket
// (removing a stale one: only the holder may) and starts serving.
func (n *Node) becomeHost(ctx context.Context, f *os.File) (err error) {
	defer func() {
		if err != nil && f != nil {
			unlock(f)
		}
	}()
	if err := writePID(f); err != nil {
		return err
	}
	if err := unix.Unlinkat(n.dirfd, sockName, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("hostrelay: removing the stale socket %s/%s: %w", n.dir, sockName, err)
	}
	local, err := newLocal(ctx, n.opts.NewHost, n.opts.Reload, n.opts.Limits.WatchQueue)
	if err != nil {
		return fmt.Errorf("hostrelay: building the host of the upstream servers: %w", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: n.addr, Net: "unix"})
	if err == nil {
		ln.SetUnlinkOnClose(false) // removed by unlinkat below, relative to the directory
		if err = unix.Fchmodat(n.dirfd, sockName, 0o600, 0); err != nil {
			ln.Close()
			unix.Unlinkat(n.dirfd, sockName, 0)
		}
	}
	if err != nil {
		sctx, cancel := context.WithTimeout(context.Background(), closeLate)
		defer cancel()
		local.Close(sctx)
		return fmt.Errorf("hostrelay: serving the relay socket %s/%s: %w", n.dir, sockName, err)
	}
	srv := newServer(local, ln, n.opts.Limits, n.log)

	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		sctx, cancel := context.WithTimeout(context.Background(), closeLate)
		defer cancel()
		n.stopHosting(sctx, srv, local, f)
		f = nil // released
		return ErrClosed
	}
	n.local, n.lockf, n.srv = local, f, srv
	old := n.cl
	n.cl = nil
	n.hostPID.Store(int64(os.Getpid()))
	n.resinkLocked()
	n.mu.Unlock()
	if old != nil {
		old.close()
	}
	n.log.Info("hostrelay: hosting the upstream servers", "dir", n.dir)
	return nil
}

// adopt makes cl the Node's way to the host.
func (n *Node) adopt(cl *client) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		cl.close()
		return ErrClosed
	}
	old := n.cl
	n.cl = cl
	n.hostPID.Store(int64(cl.hostPID))
	n.resinkLocked()
	n.mu.Unlock()
	if old != nil {
		old.close()
	}
	return nil
}

// resinkLocked moves the Node's event subscription to its current source and makes
// every watcher resync (the source changed).
func (n *Node) resinkLocked() {
	if n.unsink != nil {
		n.unsink()
		n.unsink = nil
	}
	if n.watchers.len() == 0 {
		return
	}
	n.sinkGen++
	if n.local != nil {
		n.unsink = n.local.hub.sinks.add(&nodeSink{n})
		n.watchers.resync(nil)
		return
	}
	if cl := n.cl; cl != nil {
		gen := n.sinkGen
		n.wg.Add(1)
		go func() { // a round trip: not under the lock
			defer n.wg.Done()
			ctx, cancel := context.WithTimeout(n.ctx, n.opts.ElectTimeout)
			defer cancel()
			remove, err := cl.addSink(ctx, &nodeSink{n})
			if err != nil {
				return // the connection ended: clientEnded elects again
			}
			n.mu.Lock()
			defer n.mu.Unlock()
			if n.cl != cl || n.closed || n.sinkGen != gen { // superseded meanwhile
				remove()
				return
			}
			n.unsink = remove
		}()
	}
}

// nodeSink hands the current source's events to every watcher of the Node. Each
// subscription has its own (a sinkSet removes by identity).
type nodeSink struct{ n *Node }

func (s *nodeSink) event(ev any)               { s.n.watchers.event(ev) }
func (s *nodeSink) resync(snap *host.Snapshot) { s.n.watchers.resync(snap) }

// clientEnded runs when the connection to the host ended by itself. With watchers
// registered the Node elects again at once (they need a host for their events), and
// keeps trying, with backoff, until it has one.
func (n *Node) clientEnded(cl *client) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || n.cl != cl || n.watchers.len() == 0 || n.retrying {
		return
	}
	n.retrying = true
	n.wg.Add(1)
	go n.reelect()
}

func (n *Node) reelect() {
	defer n.wg.Done()
	wait := 100 * time.Millisecond
	for {
		n.mu.Lock()
		if n.closed || n.watchers.len() == 0 || n.local != nil || (n.cl != nil && !n.cl.ended()) {
			n.retrying = false
			n.mu.Unlock()
			return
		}
		e := n.startElectionLocked()
		n.mu.Unlock()
		<-e.done
		if e.err == nil {
			continue // checked above
		}
		n.log.Warn("hostrelay: electing a host for the upstream servers failed; retrying", "err", e.err, "in", wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-n.ctx.Done():
			t.Stop()
		}
		wait = min(wait*2, 5*time.Second)
	}
}

// backend returns the way to the host, electing one first when there is none.
func (n *Node) backend(ctx context.Context) (Requests, error) {
	for {
		n.mu.Lock()
		if n.closed {
			n.mu.Unlock()
			return nil, ErrClosed
		}
		if n.local != nil {
			l := n.local
			n.mu.Unlock()
			return localOps{l}, nil
		}
		if cl := n.cl; cl != nil && !cl.ended() {
			n.mu.Unlock()
			return cl, nil
		}
		e := n.startElectionLocked()
		n.mu.Unlock()
		select {
		case <-e.done:
			if e.err != nil {
				return nil, e.err
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// localOps is the hosting Node's own way to its host: its session keys get a prefix
// of their own, as each relayed process's do ("relay/N/"), so no two processes ever
// share a per-session connection.
type localOps struct{ *Local }

const localPrefix = "local/"

func (l localOps) Call(ctx context.Context, server, method string, params json.RawMessage, opts host.CallOptions) (json.RawMessage, error) {
	if opts.SessionKey != "" {
		opts.SessionKey = localPrefix + opts.SessionKey
	}
	return l.Local.Call(ctx, server, method, params, opts)
}

func (l localOps) EndSession(ctx context.Context, key string) error {
	if key == "" {
		return nil
	}
	return l.Local.EndSession(ctx, localPrefix+key)
}

// retry runs f on the current way to the host. A request that never reached a host
// that went away (HostGoneError.Sent false) is tried again on the next one.
func retry[T any](n *Node, ctx context.Context, f func(Requests) (T, error)) (T, error) {
	for attempt := 0; ; attempt++ {
		b, err := n.backend(ctx)
		if err != nil {
			var zero T
			return zero, err
		}
		v, err := f(b)
		var hg *HostGoneError
		if errors.As(err, &hg) && !hg.Sent && attempt < 3 {
			continue
		}
		return v, err
	}
}

// Call implements Upstreams.
func (n *Node) Call(ctx context.Context, server, method string, params json.RawMessage, opts host.CallOptions) (json.RawMessage, error) {
	return retry(n, ctx, func(b Requests) (json.RawMessage, error) { return b.Call(ctx, server, method, params, opts) })
}

type catalogOK struct {
	c  host.Catalog
	ok bool
}

// Catalog implements Upstreams.
func (n *Node) Catalog(ctx context.Context, server string) (host.Catalog, bool, error) {
	r, err := retry(n, ctx, func(b Requests) (catalogOK, error) {
		c, ok, err := b.Catalog(ctx, server)
		return catalogOK{c, ok}, err
	})
	return r.c, r.ok, err
}

// RefreshCatalog implements Upstreams.
func (n *Node) RefreshCatalog(ctx context.Context, server string) (host.Catalog, error) {
	return retry(n, ctx, func(b Requests) (host.Catalog, error) { return b.RefreshCatalog(ctx, server) })
}

type statusOK struct {
	st host.Status
	ok bool
}

// Status implements Upstreams.
func (n *Node) Status(ctx context.Context, server string) (host.Status, bool, error) {
	r, err := retry(n, ctx, func(b Requests) (statusOK, error) {
		st, ok, err := b.Status(ctx, server)
		return statusOK{st, ok}, err
	})
	return r.st, r.ok, err
}

// Snapshot implements Upstreams.
func (n *Node) Snapshot(ctx context.Context) (host.Snapshot, error) {
	return retry(n, ctx, func(b Requests) (host.Snapshot, error) { return b.Snapshot(ctx) })
}

// Restart implements Upstreams.
func (n *Node) Restart(ctx context.Context, server string) error {
	_, err := retry(n, ctx, func(b Requests) (struct{}, error) { return struct{}{}, b.Restart(ctx, server) })
	return err
}

// Warm implements Upstreams.
func (n *Node) Warm(ctx context.Context, server string) error {
	_, err := retry(n, ctx, func(b Requests) (struct{}, error) { return struct{}{}, b.Warm(ctx, server) })
	return err
}

// EndSession implements Upstreams.
func (n *Node) EndSession(ctx context.Context, key string) error {
	_, err := retry(n, ctx, func(b Requests) (struct{}, error) { return struct{}{}, b.EndSession(ctx, key) })
	return err
}

// Reload implements Upstreams.
func (n *Node) Reload(ctx context.Context) error {
	_, err := retry(n, ctx, func(b Requests) (struct{}, error) { return struct{}{}, b.Reload(ctx) })
	return err
}

// Watch implements Upstreams. The watcher keeps receiving events across elections:
// each new host brings a Resync.
func (n *Node) Watch(w Watcher) (stop func()) {
	q := newWatchq(w, n.opts.Limits.WatchQueue, n.Snapshot)
	n.mu.Lock()
	first := n.watchers.len() == 0
	remove := n.watchers.add(q)
	switch {
	case n.closed:
	case first:
		// Subscribes to the source; its resync (for a relay: the host's answer to
		// the subscription) is q's first delivery.
		n.resinkLocked()
	default:
		q.resync(nil) // the subscription is live: a snapshot now misses nothing
	}
	if !n.closed && n.local == nil && (n.cl == nil || n.cl.ended()) && !n.retrying {
		n.retrying = true
		n.wg.Add(1)
		go n.reelect()
	}
	n.mu.Unlock()
	return func() {
		remove()
		q.stop()
	}
}

// Close leaves the data directory's upstream servers. A relaying Node closes its
// connection (its requests under way fail with ErrClosed). A hosting Node stops
// accepting, drops the processes relaying to it (their requests under way fail at
// once with ErrHostGone, and the calls are cancelled upstream), shuts its host down
// (host.Host.Shutdown, bounded by ctx), and only then removes the socket and releases
// the lock, so no other process can start a second copy of a server while one of
// this process's still runs.
func (n *Node) Close(ctx context.Context) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	e := n.elect
	n.stop()
	n.mu.Unlock()
	if e != nil {
		select {
		case <-e.done:
		case <-ctx.Done():
		}
	}
	n.mu.Lock()
	local, lockf, srv, cl := n.local, n.lockf, n.srv, n.cl
	n.local, n.lockf, n.srv, n.cl = nil, nil, nil, nil
	if n.unsink != nil {
		n.unsink()
		n.unsink = nil
	}
	n.mu.Unlock()
	if cl != nil {
		cl.close()
	}
	var err error
	if local != nil {
		err = n.stopHosting(ctx, srv, local, lockf)
	}
	n.watchers.each(func(k sink) { k.(*watchq).stop() })
	// The descriptor of the directory is closed once no goroutine of the Node can use
	// it (an election that outlived ctx tears itself down when it finds the Node closed).
	done := make(chan struct{})
	go func() {
		n.wg.Wait()
		unix.Close(n.dirfd)
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return err
}

// stopHosting drops the clients, shuts the host down, removes the socket and releases
// the lock, in that order. When ctx ends before the host has stopped every upstream,
// it returns the host's *host.ShutdownError at once but keeps the lock until they are
// all stopped (each is bounded by host.Options.StopTimeout), so no other process starts
// a second copy meanwhile; if this process exits first, the kernel releases it.
func (n *Node) stopHosting(ctx context.Context, srv *server, local *Local, f *os.File) error {
	srv.close(ctx)
	err := local.Close(ctx)
	release := func() {
		if uerr := unix.Unlinkat(n.dirfd, sockName, 0); uerr != nil && !errors.Is(uerr, unix.ENOENT) {
			n.log.Warn("hostrelay: removing the relay socket", "err", uerr)
		}
		unlock(f)
	}
	if err == nil {
		release()
		return nil
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		local.Close(context.Background()) // waits for the first Shutdown's outcome
		release()
	}()
	return err
}
