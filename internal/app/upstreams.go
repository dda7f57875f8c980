package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/hostrelay"
	"github.com/toolgate/toolgate/internal/keystore"
	"github.com/toolgate/toolgate/internal/mcpconfig"
	"github.com/toolgate/toolgate/internal/metrics"
	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/store"
)

// UpstreamMode says how an App takes part in running its data directory's upstream
// servers (docs/hostrelay.md).
type UpstreamMode int

const (
	// UpstreamsShared (the default): the App joins the data directory's election; the
	// process that wins hosts every installed server, the others relay to it, so no
	// server runs twice on one data directory.
	UpstreamsShared UpstreamMode = iota
	// UpstreamsRelayOnly relays to the process hosting them and never hosts itself.
	// When none hosts at Open, the App has no upstream servers at all (Upstreams is
	// nil): what it reports about them comes from the store (for the management
	// commands, which must not start a server for the length of one command).
	UpstreamsRelayOnly
)

// UpstreamCloseTimeout bounds how long App.Close waits for the upstream servers this
// process hosts to stop (each is stopped within host.Options.StopTimeout, in
// parallel; what is still running then is killed with its process group).
const UpstreamCloseTimeout = 30 * time.Second

// openUpstreams opens the keystore and joins the upstream servers of the data
// directory. It runs last in Open: NewHost reads the store and the keystore.
func (a *App) openUpstreams(ctx context.Context) error {
	ks, err := keystore.Open(a.dir, a.st)
	if err != nil {
		return err // names the key file and the fix
	}
	a.ks = ks
	a.auths = &upstreamAuths{ks: ks, log: a.log, changed: a.credentialsChanged, audit: a.auditOAuth}
	a.dialer = &upstreamDialer{ks: ks, log: a.log, requests: a.UpstreamRequests, auths: a.auths, resolver: testResolver(a.log)}
	a.usync = newUpstreamSync(a)
	node, err := hostrelay.Open(ctx, a.dir, hostrelay.Options{
		NewHost:   a.newHost,
		Reload:    a.reloadHost,
		RelayOnly: a.opts.Upstreams == UpstreamsRelayOnly,
		Logger:    a.log,
	})
	if errors.Is(err, hostrelay.ErrNoHost) && a.opts.Upstreams == UpstreamsRelayOnly {
		a.usync.request(ctx, true)
		return nil
	}
	if err != nil {
		a.usync.close()
		return fmt.Errorf("joining the upstream servers of %s: %w", a.dir, err)
	}
	a.up = node
	a.ut.up = node // what upstream tools call (upstreamtools.go)
	// toolgate_upstream_state and _restarts_total, fed by the host's events.
	states := metrics.NewUpstreamTable()
	a.metrics.SetUpstreams(states.States)
	a.stopUpWatch = node.Watch(&appWatcher{a: a, states: states})
	a.usync.request(ctx, true)
	return nil
}

// Upstreams is the data directory's upstream servers as this process reaches them:
// hosted here or relayed to the process that hosts them (hostrelay.Upstreams). It is
// nil only for an App opened UpstreamsRelayOnly when no process hosted them.
func (a *App) Upstreams() hostrelay.Upstreams { return a.up }

// closeUpstreams stops watching and, when this process hosts, stops every upstream
// server (parallel, bounded by UpstreamCloseTimeout); relaying processes just leave.
func (a *App) closeUpstreams() error {
	if a.stopUpWatch != nil {
		a.stopUpWatch()
	}
	if a.usync != nil {
		a.usync.close()
	}
	if a.up == nil {
		if a.auths != nil {
			a.auths.close()
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), UpstreamCloseTimeout)
	defer cancel()
	err := a.up.Close(ctx)
	a.auths.close()
	if err != nil {
		return fmt.Errorf("stopping the upstream servers: %w", err)
	}
	return nil
}

// ksScope is the keystore scope an installation's secrets are sealed under.
func ksScope(m *store.MCPServer) string {
	if m.Scope == store.ScopeUser {
		return "user"
	}
	return "workspace:" + m.WorkspaceID
}

// definition is m as the host runs it.
func definition(m *store.MCPServer) (host.Definition, error) {
	var srv mcpconfig.Server
	if err := json.Unmarshal(m.Definition, &srv); err != nil {
		return host.Definition{}, fmt.Errorf("reading the definition of %q: %w", m.Name, err)
	}
	iso := host.IsolationShared
	if srv.Isolation == mcpconfig.Session {
		iso = host.IsolationSession
	}
	return host.Definition{Name: m.Name, Fingerprint: m.Fingerprint, Isolation: iso, Required: m.Required,
		Disabled: !m.Enabled, CallTimeout: srv.CallDeadline(), Config: dialConfig{server: srv, ksScope: ksScope(m)}}, nil
}

// definitions reads every installed server's host definition. One whose stored
// definition cannot be read is left out (and logged) rather than keeping the others
// from running.
func (a *App) definitions(ctx context.Context) ([]host.Definition, error) {
	ms, err := a.st.ListMCPServers(ctx, "")
	if err != nil {
		return nil, err
	}
	defs := make([]host.Definition, 0, len(ms))
	for i := range ms {
		d, err := definition(&ms[i])
		if err != nil {
			a.log.Error("an installed server cannot run", "server", ms[i].Name, "err", err)
			continue
		}
		defs = append(defs, d)
	}
	return defs, nil
}

// newHost builds this process's host when it wins the election (hostrelay.NewHostFunc).
func (a *App) newHost(ctx context.Context, obs host.Observer) (*host.Host, error) {
	defs, err := a.definitions(ctx)
	if err != nil {
		return nil, err
	}
	o := host.Options{Dialer: a.dialer, Observer: snapshotObserver{next: obs, a: a}, Catalogs: catalogStore{a.st},
		Logger: a.log, Servers: defs, Notifications: a.UpstreamNotification}
	if a.opts.HostOptions != nil {
		a.opts.HostOptions(&o)
	}
	return host.New(o)
}

// reloadHost makes the host match the installed servers (hostrelay.ReloadFunc): it
// runs in the hosting process whenever any process on the data directory changed them.
func (a *App) reloadHost(ctx context.Context, h *host.Host) error {
	defs, err := a.definitions(ctx)
	if err != nil {
		return err
	}
	keep := make(map[string]bool, len(defs))
	var errs []error
	for _, d := range defs {
		keep[d.Name] = true
		if _, err := h.Install(ctx, d); err != nil {
			errs = append(errs, err)
		}
	}
	for _, st := range h.Snapshot().Servers {
		if !keep[st.Name] {
			if err := h.Remove(ctx, st.Name); err != nil && !errors.Is(err, host.ErrUnknownServer) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// snapshotObserver moves the persisted snapshot_version for every runtime state change
// of the host this process runs, before the event goes on to the watchers: installs,
// policy and catalogue changes move it by their own store triggers. It runs in the
// hosting process only, so a transition counts once whoever watches it.
type snapshotObserver struct {
	next host.Observer
	a    *App
}

func (o snapshotObserver) ServerChanged(e host.ServerEvent)   { o.next.ServerChanged(e) }
func (o snapshotObserver) CatalogChanged(e host.CatalogEvent) { o.next.CatalogChanged(e) }

func (o snapshotObserver) StateChanged(e host.StateEvent) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if _, err := o.a.st.BumpMCPSnapshot(ctx); err != nil {
		o.a.log.Warn("moving the snapshot version", "server", e.Server, "err", err)
	}
	cancel()
	o.next.StateChanged(e)
}

// appWatcher receives the host's events in this process (hosting or relaying): it
// brings the kernel side up to date (upstreamSync), keeps the upstream metrics'
// table (states: each transition as it is delivered, a resync's snapshot whole) and
// turns runtime and catalogue changes into management notifications.
type appWatcher struct {
	a      *App
	states *metrics.UpstreamTable
}

func (w *appWatcher) Resync(snap host.Snapshot) {
	m := make(map[string]string, len(snap.Servers))
	for _, s := range snap.Servers {
		m[s.Name] = string(s.State)
	}
	w.states.Reset(m)
	w.a.usync.request(context.Background(), false)
}

func (w *appWatcher) ServerChanged(e host.ServerEvent) {
	if e.Change == host.ChangeRemoved {
		w.states.Remove(e.Server)
	}
	w.a.usync.request(context.Background(), false)
}

func (w *appWatcher) StateChanged(e host.StateEvent) {
	w.states.Transition(e.Server, string(e.To), e.To == host.StateRestarting)
	if !w.a.subs.active() {
		return
	}
	w.a.publishStatus(e)
}

func (w *appWatcher) CatalogChanged(e host.CatalogEvent) {
	w.a.usync.request(context.Background(), false)
	if w.a.subs.active() {
		w.a.publishCatalog(e)
	}
}

// upstreamSync hands installed servers to the kernel side (the onUpstream* hooks). One
// goroutine does the work, so the hooks are called one at a time and in order and no
// lock is held across the store and catalogue reads; requests coalesce (one pass
// covers every request made before it began). A pass diffs the installed servers and
// their catalogue versions against what it handed over last.
type upstreamSync struct {
	a    *App
	kick chan struct{}
	quit chan struct{}
	done chan struct{}

	mu      sync.Mutex
	want    uint64        // requests made
	synced  uint64        // requests covered by a finished pass
	changed chan struct{} // closed and replaced when synced moves
	names   map[string]store.MCPServer

	known  map[string]syncedServer // the worker's only
	passes int                     // the worker's only
	primed map[string]time.Time    // the worker's only: first catalogue fetches started (prime)
	primes sync.WaitGroup          // those fetches, waited for by close
	// stopPrimes ends those fetches when the App closes.
	primeCtx   context.Context
	stopPrimes context.CancelFunc
}

type syncedServer struct {
	state       UpstreamServerState
	fingerprint string
	version     uint64
	digest      string
}

func newUpstreamSync(a *App) *upstreamSync {
	s := &upstreamSync{a: a, kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
		changed: make(chan struct{}), names: map[string]store.MCPServer{}, known: map[string]syncedServer{},
		primed: map[string]time.Time{}}
	s.primeCtx, s.stopPrimes = context.WithCancel(context.Background())
	go s.run()
	return s
}

// request asks for a pass; with wait it returns once a pass that began after the
// request finished (or ctx ended, or the App is closing).
func (s *upstreamSync) request(ctx context.Context, wait bool) {
	s.mu.Lock()
	s.want++
	g := s.want
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	for wait {
		s.mu.Lock()
		if s.synced >= g {
			s.mu.Unlock()
			return
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return
		case <-s.done:
			return
		}
	}
}

func (s *upstreamSync) close() {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	<-s.done
	s.stopPrimes()
	s.primes.Wait()
}

func (s *upstreamSync) run() {
	defer close(s.done)
	for {
		select {
		case <-s.kick:
		case <-s.quit:
			return
		}
		s.mu.Lock()
		g := s.want
		s.mu.Unlock()
		s.pass()
		s.mu.Lock()
		s.synced = g
		close(s.changed)
		s.changed = make(chan struct{})
		s.mu.Unlock()
	}
}

func (s *upstreamSync) pass() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ms, err := s.a.st.ListMCPServers(ctx, "")
	if err != nil {
		s.a.log.Warn("reading the installed servers", "err", err)
		return
	}
	names := make(map[string]store.MCPServer, len(ms))
	for _, m := range ms {
		names[m.Name] = m
	}
	s.mu.Lock()
	for n, m := range names {
		s.names[n] = m // a removed one stays known by name, for its last notifications
	}
	s.mu.Unlock()
	for _, m := range ms {
		st := UpstreamServerState{ID: m.ID, Name: m.Name, WorkspaceID: m.WorkspaceID, Scope: m.Scope,
			Enabled: m.Enabled, Implicit: m.Implicit}
		var cat host.Catalog
		if s.a.up != nil {
			c, ok, err := s.a.up.Catalog(ctx, m.Name)
			if err != nil {
				// The host cannot be asked now (it went away; the next host resyncs):
				// keep what was handed over rather than empty the server's tools.
				s.a.log.Warn("reading a server's catalogue", "server", m.Name, "err", err)
				continue
			}
			if ok {
				cat = c
			} else if m.Enabled {
				s.prime(m.Name)
			}
		}
		prev, seen := s.known[m.Name]
		if seen && prev.state == st && prev.fingerprint == m.Fingerprint && prev.version == cat.Version && prev.digest == cat.Digest {
			continue
		}
		if seen && prev.state.ID != st.ID {
			s.a.onUpstreamRemoved(m.Name) // reinstalled: the old installation's tools go first
			s.notify(&m, mgmt.ChangeRemoved)
			seen = false
		}
		s.known[m.Name] = syncedServer{state: st, fingerprint: m.Fingerprint, version: cat.Version, digest: cat.Digest}
		s.a.onUpstreamChange(st, cat)
		switch {
		case !seen:
			s.notify(&m, mgmt.ChangeInstalled)
		case prev.fingerprint != m.Fingerprint:
			s.notify(&m, mgmt.ChangeUpdated)
		case prev.state != st:
			s.notify(&m, mgmt.ChangePolicy)
		}
	}
	for n, prev := range s.known {
		if _, ok := names[n]; !ok {
			delete(s.known, n)
			s.a.onUpstreamRemoved(n)
			gone := store.MCPServer{ID: prev.state.ID, Name: n, WorkspaceID: prev.state.WorkspaceID, Scope: prev.state.Scope}
			s.notify(&gone, mgmt.ChangeRemoved)
		}
	}
	s.passes++
}

// primeEvery is how often a server that has never had a catalogue is asked for one.
const primeEvery = time.Minute

// prime fetches, in the background, the first catalogue of an enabled server that
// has none (just installed, or never reached): its tools are published from the
// catalogue, and nothing else would start it, since starts are lazy. The fetch
// starts the server (the host applies its backoff and circuit to a failing one); its
// catalogue event brings the next pass. A process that only relays and must not start
// servers (UpstreamsRelayOnly) never primes.
func (s *upstreamSync) prime(name string) {
	if s.a.opts.Upstreams == UpstreamsRelayOnly {
		return
	}
	if t, ok := s.primed[name]; ok && time.Since(t) < primeEvery {
		return
	}
	s.primed[name] = time.Now()
	up := s.a.up
	s.primes.Add(1)
	go func() {
		defer s.primes.Done()
		ctx, cancel := context.WithTimeout(s.primeCtx, 2*time.Minute)
		defer cancel()
		_, err := up.RefreshCatalog(ctx, name)
		// The pass saw the server in the store before the host loaded it (an install
		// while this process runs): ask again shortly rather than in primeEvery.
		for wait := 50 * time.Millisecond; errors.Is(err, host.ErrUnknownServer) && wait <= 2*time.Second; wait *= 2 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
				_, err = up.RefreshCatalog(ctx, name)
			}
			if ctx.Err() != nil {
				break
			}
		}
		if err != nil && ctx.Err() == nil {
			s.a.log.Warn("fetching a server's first catalogue", "server", name, "err", err)
		}
		// Done only once a pass has handed the catalogue over (WaitFirstCatalogs).
		s.request(ctx, true)
	}()
}

// FirstCatalogWait bounds how long a surface with a fixed turn waits for first
// catalogues (WaitFirstCatalogs): well inside the time harnesses give a server to
// answer initialize.
const FirstCatalogWait = 10 * time.Second

// WaitFirstCatalogs waits, until ctx ends, for the first catalogue fetches of the
// installed servers that had none when the App opened (prime), so that a surface
// whose turn is fixed for its whole life (toolgate mcp, bridge) opens it with their
// tools. A server that fails to start ends its wait with the failure; it never
// blocks past ctx.
func (a *App) WaitFirstCatalogs(ctx context.Context) {
	if a.usync == nil {
		return
	}
	a.usync.request(ctx, true) // the first pass has started every prime it needs
	done := make(chan struct{})
	go func() { a.usync.primes.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// notify sends mcp/changed for a change a pass found, whichever process made it. The
// first pass finds every installed server and reports none: it is this process's
// starting point, not a change.
func (s *upstreamSync) notify(m *store.MCPServer, change string) {
	if s.passes == 0 || !s.a.subs.active() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.a.subs.publish(&mgmt.Changed{SnapshotVersion: s.a.snapshotVersion(ctx), At: time.Now().Unix(),
		NotifiedServer: notified(m), Change: change})
}

// server returns what the last pass knew about the server called name, reading the
// store when it knew nothing.
func (s *upstreamSync) server(ctx context.Context, name string) (store.MCPServer, bool) {
	s.mu.Lock()
	m, ok := s.names[name]
	s.mu.Unlock()
	if ok {
		return m, true
	}
	m, err := s.a.st.MCPServerByName(ctx, name)
	return m, err == nil
}
