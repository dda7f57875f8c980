// Package app wires toolgate's subsystems together (store, kernel, audit, tokens, local
// tools) for the CLI commands and end-to-end tests. It is the only package that knows
// them all; nothing below cli imports it.
package app

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/datadir"
	"github.com/toolgate/toolgate/internal/exectoken"
	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/hostrelay"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/keystore"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/metrics"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/internal/version"
)

// Options configures one App.
type Options struct {
	// DataDir holds the embedded store, the keystore key and the owner token; created
	// owner-only on first use.
	DataDir string
	// DatabaseURL, when set, selects a PostgreSQL store (shared by replicas) instead of
	// the SQLite database in DataDir.
	DatabaseURL string
	// Tools are extra tools to register (for example the local tools of a workspace).
	Tools []*kernel.Tool
	// Logger receives internal failures; nil discards.
	Logger *slog.Logger
	// Durability is how far a call's audit event has travelled before the tool runs
	// (store.Durability; docs/performance.md); empty is store.DefaultDurability.
	Durability store.Durability
	// Upstreams says whether this process may host the data directory's upstream
	// servers or only relays to the one that does (default UpstreamsShared).
	Upstreams UpstreamMode
	// NoWarm turns off starting the upstream servers a newly opened turn publishes
	// in the background (warm.go); their first call then starts them.
	NoWarm bool
	// HostOptions, when set, adjusts the host this process builds if it hosts the
	// upstream servers (timings in tests); Dialer, Observer, Catalogs and Servers are
	// the app's and must be kept.
	HostOptions func(*host.Options)
}

// TurnRequest opens one turn.
type TurnRequest struct {
	// Principal whose grants decide the turn's catalogue and calls. Empty means
	// DefaultPrincipal.
	Principal string
	// Transport is recorded in audit events ("stdio", "http", "api").
	Transport string
	// Namer maps a canonical tool id to the name published on this surface; nil
	// publishes canonical ids. It must be one-to-one over the catalogue.
	Namer func(canonicalID string) string
	// Alias, when set, reproduces the harness's display name for diagnosis only.
	Alias func(publishedName string) string
	// Capabilities narrow the turn below what the grants allow (see
	// kernel.TurnOptions.Capabilities); empty leaves the grants alone to decide.
	Capabilities []string
	// ID, when set, is the turn's execution id (ResumeTurn: a session opened on
	// another replica keeps its turn's).
	ID string
	// Selections bring upstream servers' tools into the turn, those of servers whose
	// allow_implicit_invocation is false included (kernel.TurnOptions.Selections);
	// Selections(turn) reports what became of each.
	Selections []kernel.Selection
}

// Outcome is how a turn ended.
type Outcome string

const (
	OutcomeCompleted Outcome = "completed"
	OutcomeEscalated Outcome = "escalated"
	OutcomeFailed    Outcome = "failed"
)

// Turn is one open turn: a fixed catalogue, served by the MCP layer and the HTTP API
// (it satisfies mcpserver.Turn and httpapi.Turn).
type Turn interface {
	ListTools(ctx context.Context) (*mcpspec.ToolList, error)
	CallTool(ctx context.Context, req *mcpspec.CallRequest) (*mcpspec.CallResult, error)
	// ID is the turn's execution id.
	ID() string
	// Outcome reports how the turn has ended so far (completed unless it escalated or failed).
	Outcome() Outcome
	// Close ends the turn; later calls are refused.
	Close() error
}

// DefaultPrincipal is the identity used when none is given, and the one the default
// grants and the owner token speak for.
const DefaultPrincipal = "default"

// metaDefaultsSeeded marks that the default grants were written once; removing them
// afterwards sticks.
const metaDefaultsSeeded = "default_grants_seeded"

// DefaultGrants are written on the first open of a data directory, and never again.
func DefaultGrants() []policy.Grant {
	return []policy.Grant{
		{Principal: DefaultPrincipal, Tool: "local.*", Action: "*", Resource: "*", Effect: policy.Allow,
			Note: "default: the local workspace tools, confined to the workspace"},
		{Principal: DefaultPrincipal, Tool: "server.*", Action: "read", Effect: policy.Allow,
			Note: "default: read-only tools of installed servers"},
		{Principal: DefaultPrincipal, Tool: kernel.EscalateID, Action: "execute", Effect: policy.Allow,
			Note: "default: a turn may always ask a person"},
	}
}

// App is a running set of subsystems over one data directory.
type App struct {
	opts     Options
	log      *slog.Logger
	dir      string // the data directory, resolved (datadir.Prepare)
	st       *store.Store
	k        *kernel.Kernel
	tokenKey []byte
	metrics  *metrics.Metrics // what /metrics exposes (ops.go)

	refreshSeq atomic.Int64
	pol        policyState // skips reloading an unchanged policy; see refresh.go
	stopWatch  func()      // ends watchPolicy; nil when the store does not notify
	// policyGen counts the grant and namespace changes refresh applied; a turn
	// remembers it at open and is stale once it moved (see turn.Stale).
	policyGen  atomic.Int64
	mu         sync.Mutex // guards the fields below; never held across I/O
	appliedSeq int64
	lastGrants []policy.Grant
	lastNS     map[string]bool

	ut     upstreamTools // the upstream servers' tools (upstreamtools.go)
	bnotes bindingNotes  // when each upstream tool's use was last recorded (bindings.go)
	cl     clients       // the open turns (clients.go)
	rsubs  resourceSubs  // the sessions' resource subscriptions (resourcesubs.go)
	// The upstream servers (upstreams.go): the keystore their secrets are sealed in,
	// the dialer the host uses when this process hosts, the data directory's servers
	// as this process reaches them, and what hands them to the kernel side.
	ks                *keystore.Keystore
	dialer            *upstreamDialer
	auths             *upstreamAuths
	up                hostrelay.Upstreams
	stopUpWatch       func()
	usync             *upstreamSync
	onUpstreamChange  func(UpstreamServerState, host.Catalog)
	onUpstreamRemoved func(name string)
	callableName      func(server, raw string) string
	subs              subscribers  // management notifications (notify.go)
	warm              warmer       // background starts for new turns (warm.go)
	lw                listWatchers // sessions' list changes (listnotify.go)
	// polSet is the policy the kernel holds, for deciding who administers (mgmtauth.go).
	polSet atomic.Pointer[policy.Set]
}

// Open opens (creating if needed) the data directory and its store, seeds the default
// grants on first creation, and registers opts.Tools.
func Open(ctx context.Context, opts Options) (*App, error) {
	if opts.DataDir == "" {
		return nil, errors.New("app: no data directory")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	dir := opts.DataDir
	if opts.DatabaseURL != "" {
		// The SQLite store prepares the data directory itself; with PostgreSQL it still
		// holds this replica's owner token and keystore key, so it gets the same checks.
		var err error
		if dir, err = datadir.Prepare(opts.DataDir); err != nil {
			return nil, err // it names the file and the fix already
		}
	}
	st, err := store.OpenDatabase(ctx, opts.DataDir, opts.DatabaseURL, store.WithDurability(opts.Durability))
	if errors.Is(err, datadir.ErrUnsafe) {
		return nil, err // it names the file and the fix already
	}
	if err != nil && opts.DatabaseURL == "" {
		return nil, fmt.Errorf("opening the store in %s: %w", opts.DataDir, err)
	}
	if err != nil {
		return nil, err // names the database, password redacted
	}
	if opts.DatabaseURL == "" {
		dir = filepath.Dir(st.Path())
	}
	a := &App{opts: opts, log: log, st: st, dir: dir, metrics: newMetrics(st)}
	a.initUpstreamHooks()
	if err := a.init(ctx); err != nil {
		st.Close()
		return nil, err
	}
	if err := a.openUpstreams(ctx); err != nil {
		st.Close()
		return nil, err
	}
	a.watchPolicy()
	return a, nil
}

func (a *App) init(ctx context.Context) error {
	var err error
	if a.tokenKey, err = a.st.Key(ctx, exectoken.StoreKeyName); err != nil {
		return fmt.Errorf("reading the token key: %w", err)
	}
	argKey, err := a.st.Key(ctx, "audit-hmac")
	if err != nil {
		return fmt.Errorf("reading the audit key: %w", err)
	}
	if err := seedDefaults(ctx, a.st); err != nil {
		return err
	}
	a.k, err = kernel.New(kernel.Options{
		Audit:       a.st,
		Escalations: escalations{a.st},
		HashArg:     func(v []byte) string { return audit.HashValue(argKey, v) },
		Logger:      a.log,
	})
	if err != nil {
		return err
	}
	if err := a.k.Register(a.opts.Tools...); err != nil {
		return fmt.Errorf("registering tools: %w", err)
	}
	return a.refresh(ctx)
}

func seedDefaults(ctx context.Context, st *store.Store) error {
	_, done, err := st.Meta(ctx, metaDefaultsSeeded)
	if err != nil {
		return fmt.Errorf("reading store meta: %w", err)
	}
	if done {
		return nil
	}
	for _, g := range DefaultGrants() {
		if _, err := st.AddGrant(ctx, g); err != nil {
			return fmt.Errorf("seeding default grants: %w", err)
		}
	}
	if err := st.SetMeta(ctx, metaDefaultsSeeded, time.Now().UTC().Format(time.RFC3339)); err != nil {
		return fmt.Errorf("seeding default grants: %w", err)
	}
	return nil
}

// escalations adapts the store to the kernel's EscalationLog.
type escalations struct{ st *store.Store }

func (e escalations) RecordEscalation(ctx context.Context, x kernel.Escalation) error {
	return e.st.AddEscalation(ctx, store.Escalation{ID: x.ID, TurnID: x.TurnID, CallID: x.CallID,
		Principal: x.Principal, Reason: x.Reason, Note: x.Note, CreatedAt: x.CreatedAt})
}

// refresh reloads grants and namespace switches from the store (another process, such
// as `toolgate grant add`, may have changed them) and recompiles the policy only when
// the grants changed. It first reads the store's policy version and returns at once if
// the kernel's policy was loaded at that version (refresh.go), so an unchanged store
// costs one single-row read. Refreshes run concurrently (no lock is held across the store
// reads); a sequence number makes sure an older read never replaces a newer one.
func (a *App) refresh(ctx context.Context) error {
	if r, ok := ctx.Value(requestKey{}).(*requestRefresh); ok && r.app == a {
		// One request opens a turn, checks a session's staleness and makes calls:
		// the store is read for the first of them only (see Request).
		r.once.Do(func() { r.err = a.reload(ctx) })
		return r.err
	}
	return a.reload(ctx)
}

// reload is refresh without the request's memo. When the policy version moved, the
// installed servers may have too (an install, an uninstall or a policy change moves it:
// migration 0005), so the kernel side is brought up to date before the request goes on.
func (a *App) reload(ctx context.Context) error {
	moved, err := a.reloadPolicy(ctx)
	if moved && a.usync != nil {
		if a.up != nil && a.st.Dialect() == "postgres" {
			// Replicas share the database, not the host: this replica's host catches up
			// with servers installed or changed through another one.
			if rerr := a.up.Reload(ctx); rerr != nil {
				a.log.Warn("making the upstream host re-read the installed servers", "err", rerr)
			}
		}
		a.usync.request(ctx, true)
	}
	return err
}

// reloadPolicy re-reads grants and namespaces when the policy version moved; moved
// reports whether it had.
func (a *App) reloadPolicy(ctx context.Context) (moved bool, err error) {
	seq := a.refreshSeq.Add(1)
	ver, current, err := a.policyCurrent(ctx)
	if err != nil {
		return false, err
	}
	if current {
		return false, nil // nothing changed since the policy the kernel holds was loaded
	}
	// Pins, holds and trust policies move the version too (an approval from the CLI):
	// the upstream servers' catalogues are reconciled again once this reload is done
	// (deferred before a.mu is taken below, so it runs after a.mu is released).
	defer a.resyncTrust()
	grants, err := a.st.ListGrants(ctx)
	if err != nil {
		return true, fmt.Errorf("loading grants: %w", err)
	}
	ns, err := a.st.Namespaces(ctx)
	if err != nil {
		return true, fmt.Errorf("loading namespaces: %w", err)
	}
	a.mu.Lock()
	grantsChanged := !reflect.DeepEqual(grants, a.lastGrants)
	a.mu.Unlock()
	var set *policy.Set
	if grantsChanged {
		if set, err = policy.Compile(grants); err != nil {
			// Fail closed: an unreadable grant (a deny among them) must not be skipped.
			return true, fmt.Errorf("%w (fix or remove it with `toolgate grant rm`)", err)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if seq <= a.appliedSeq {
		return true, nil // a later refresh already applied newer state
	}
	if set, err = a.recheckGrants(grants, set); err != nil {
		return true, err
	}
	a.appliedSeq = seq
	if set != nil {
		a.k.SetPolicy(set)
		a.polSet.Store(set)
		a.lastGrants = grants
		a.policyGen.Add(1)
	}
	if !reflect.DeepEqual(ns, a.lastNS) {
		a.k.SetNamespaces(ns)
		a.lastNS = ns
		a.policyGen.Add(1)
	}
	a.policyLoaded(ver)
	return true, nil
}

// OpenTurn resolves a principal's catalogue once and returns the turn serving it. The
// grants and namespace switches are re-read from the store first.
func (a *App) OpenTurn(ctx context.Context, req TurnRequest) (Turn, error) {
	if req.Principal == "" {
		req.Principal = DefaultPrincipal
	}
	if err := a.refresh(ctx); err != nil {
		return nil, fmt.Errorf("opening a turn: %w", err)
	}
	// Read before the turn snapshots the policy: a change landing in between makes
	// the turn look stale once (one extra re-initialize), never fresh when it is not.
	gen := a.policyGen.Load()
	t, err := a.k.OpenTurn(ctx, kernel.TurnOptions{Principal: req.Principal, Transport: req.Transport, Namer: req.Namer, Alias: req.Alias,
		Capabilities: req.Capabilities, ID: req.ID, Selections: req.Selections})
	if err != nil {
		return nil, err
	}
	a.warmTurn(t)
	return turn{Turn: t, a: a, gen: gen, surface: req.Transport, cl: a.cl.add(t.ID(), req.Principal, req.Transport)}, nil
}

// turn adapts *kernel.Turn to Turn.
type turn struct {
	*kernel.Turn
	a       *App
	gen     int64        // policyGen when the turn opened
	surface string       // its transport, a metrics label
	cl      *clientEntry // its entry among the open turns (clients.go)
}

// CallTool first brings the kernel's policy up to date with the store (another process,
// `toolgate grant rm`, may have changed it; when nothing changed this is one cheap read),
// so the kernel decides the call by the current grants as well as the turn's own: a
// revocation stops a bridge or `toolgate mcp` at its next call. If the store cannot be
// read the call is still decided by the policy already loaded, and its audit event, which
// needs the same store, fails it closed.
func (t turn) CallTool(ctx context.Context, req *mcpspec.CallRequest) (*mcpspec.CallResult, error) {
	ctx, span := telemetry.StartCall(telemetry.FromMeta(ctx, req.Meta), t.surface)
	if err := t.a.refresh(ctx); err != nil {
		t.a.log.WarnContext(ctx, "re-reading grants before a call", "err", err)
	}
	t.cl.called()
	start := time.Now()
	res, err := t.Turn.CallTool(ctx, req)
	span.End(t.observe(req, res, err, time.Since(start)))
	return res, err
}

// Stale re-reads the grants and namespace switches from the store and reports whether
// they changed since the turn opened. The turn's catalogue never changes, so a surface
// that serves long-lived sessions (the /mcp handler of toolgate serve,
// mcpserver.StaleTurn) ends a stale one and the client opens a new turn whose catalogue
// matches the current grants. A store that cannot be read counts as stale: fail closed.
func (t turn) Stale(ctx context.Context) bool {
	if err := t.a.refresh(ctx); err != nil {
		t.a.log.Warn("re-reading grants for an open session", "err", err)
		return true
	}
	return t.a.policyGen.Load() != t.gen
}

func (t turn) Outcome() Outcome { return Outcome(t.Turn.Outcome()) }

// Register adds tools to the running kernel (for example an upstream server's catalogue
// once it is ready).
func (a *App) Register(tools ...*kernel.Tool) error { return a.k.Register(tools...) }

// Store is the App's store, for tests that set up or inspect it directly. Commands go
// through the App's methods and Admin instead.
func (a *App) Store() *store.Store { return a.st }

// Durability is the audit durability level the store was opened with.
func (a *App) Durability() Durability { return a.st.Durability() }

// Database names the PostgreSQL database the App uses, password redacted, or "" for the
// embedded SQLite store in the data directory.
func (a *App) Database() string {
	if a.st.Dialect() == "postgres" {
		return a.st.Path()
	}
	return ""
}

// Audit lists the events f selects, oldest first (toolgate run's summary).
func (a *App) Audit(ctx context.Context, f audit.Filter) ([]audit.Event, error) {
	return a.st.ListAudit(ctx, f)
}

// Kernel is the App's kernel.
func (a *App) Kernel() *kernel.Kernel { return a.k }

// MaxTokenTTL bounds MintToken's ttl.
const MaxTokenTTL = 30 * 24 * time.Hour

// MintToken issues an execution token identifying principal and session. It carries no
// authority: every call is still authorized against a grant.
func (a *App) MintToken(principal, session string, ttlSeconds int) (string, error) {
	return mintToken(a.tokenKey, principal, session, time.Duration(ttlSeconds)*time.Second)
}

// VerifyToken checks an execution token and returns the principal it identifies.
func (a *App) VerifyToken(token string) (principal string, ok bool) {
	c, err := exectoken.Verify(a.tokenKey, token, time.Now())
	if err != nil {
		return "", false
	}
	return c.Principal, true
}

// BridgeSessionPrefix starts the session claim of a token minted for one bridge
// (toolgate bridge, toolgate run). Such a token opens that bridge and nothing else:
// no other bridge, and not toolgate serve. A bridge's turn may be narrower than its
// principal's grants (--capability), so a token that worked elsewhere would let
// whoever holds it — the harness the bridge was opened for — step outside the
// narrowing.
const BridgeSessionPrefix = "bridge:"

// MintBridgeToken issues the token of one bridge session (see BridgeSessionPrefix).
func (a *App) MintBridgeToken(principal, sessionID string, ttlSeconds int) (string, error) {
	if sessionID == "" {
		return "", errors.New("minting a bridge token: no session id")
	}
	return a.MintToken(principal, BridgeSessionPrefix+sessionID, ttlSeconds)
}

// BridgeAuthorizer accepts exactly the tokens MintBridgeToken issued for this
// principal and bridge session (valid, unexpired), and nothing else.
func (a *App) BridgeAuthorizer(principal, sessionID string) func(token string, present bool) bool {
	want := []byte(BridgeSessionPrefix + sessionID)
	return func(token string, present bool) bool {
		if !present || sessionID == "" {
			return false
		}
		c, err := exectoken.Verify(a.tokenKey, token, time.Now())
		if err != nil {
			return false
		}
		return c.Principal == principal && subtle.ConstantTimeCompare([]byte(c.Session), want) == 1
	}
}

// OwnerTokenFile is the owner token's file name inside the data directory.
const OwnerTokenFile = datadir.OwnerTokenFile

// Dir is the data directory, resolved.
func (a *App) Dir() string { return a.dir }

// OwnerTokenPath is where the owner token lives (OwnerToken creates it).
func (a *App) OwnerTokenPath() string { return filepath.Join(a.dir, OwnerTokenFile) }

// OwnerToken returns the data directory's owner token, creating it (0600, whatever the
// umask) on first use. created reports whether this call created it. A token file that
// group or others could read, that belongs to another user or that is a symbolic link
// is refused (datadir.ErrUnsafe), never used: it may have been read already.
func (a *App) OwnerToken() (tok string, created bool, err error) {
	p := a.OwnerTokenPath()
	if f, _, err := datadir.OpenFile("owner token", p, os.O_RDONLY); err == nil {
		b, err := io.ReadAll(io.LimitReader(f, 4096))
		f.Close()
		if err != nil {
			return "", false, fmt.Errorf("reading the owner token: %w", err)
		}
		tok = strings.TrimSpace(string(b))
		if len(tok) < 32 {
			return "", false, fmt.Errorf("owner token %s is too short; delete it to make a new one", p)
		}
		return tok, false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", false, err
	}
	var b [32]byte
	_, _ = rand.Read(b[:])
	tok = "tgo_" + base64.RawURLEncoding.EncodeToString(b[:])
	f, _, err := datadir.OpenFile("owner token", p, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if errors.Is(err, os.ErrExist) {
		return a.OwnerToken() // another process won the race
	}
	if err != nil {
		return "", false, err
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		os.Remove(p)
		return "", false, fmt.Errorf("writing the owner token: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", false, fmt.Errorf("writing the owner token: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", false, fmt.Errorf("writing the owner token: %w", err)
	}
	return tok, true, nil
}

// Authenticate maps a bearer token to a principal: the owner token speaks for
// DefaultPrincipal, an execution token for the principal it names — except a bridge's
// token (BridgeSessionPrefix), which opens only its own bridge. Comparison with the
// owner token is constant-time.
func (a *App) Authenticate(owner string) func(token string, present bool) (string, bool) {
	return func(token string, present bool) (string, bool) {
		if !present || token == "" {
			return "", false
		}
		if owner != "" && subtle.ConstantTimeCompare([]byte(token), []byte(owner)) == 1 {
			return DefaultPrincipal, true
		}
		c, err := exectoken.Verify(a.tokenKey, token, time.Now())
		if err != nil || strings.HasPrefix(c.Session, BridgeSessionPrefix) {
			return "", false
		}
		return c.Principal, true
	}
}

// Shutdown cancels the tool calls still in flight and returns once each one's outcome
// event (failed cancelled_by_shutdown) is written, so that every executed call is
// recorded before the store closes (kernel.Kernel.Shutdown); later calls are refused.
// It returns how many calls it cancelled. A command calls it once its surfaces have
// stopped taking work and their drain deadline has passed, before closing them.
func (a *App) Shutdown() int {
	if a.k == nil {
		return 0
	}
	return a.k.Shutdown()
}

// Close shuts the kernel down (Shutdown: every call's outcome is written), stops
// watching for changes, stops the upstream servers this process hosts (in parallel,
// bounded; no child is left running) and closes the store last, so a command that did
// not call Shutdown still loses no outcome.
func (a *App) Close() error {
	a.Shutdown()
	if a.stopWatch != nil {
		a.stopWatch()
	}
	a.rsubs.wg.Wait() // closed turns' unsubscribes, while the upstreams still run
	uerr := a.closeUpstreams()
	return errors.Join(uerr, a.st.Close())
}

// ServerInfo is how every MCP surface names itself: initialize's serverInfo and
// server/discover's _meta.
func ServerInfo() mcpspec.Implementation {
	return mcpspec.Implementation{Name: "toolgate", Version: version.String()}
}

// Instructions is what every MCP surface tells a harness's model in initialize and
// server/discover: how to read toolgate's answers, so that a permission decision is not
// mistaken for an outage.
const Instructions = `toolgate publishes only the tools this caller may use, and authorizes every call on its exact arguments. ` +
	`A refused or failed call is still a normal tool result: isError is true and _meta["toolgate/status"] is "denied" (a permission decision: retrying the same call will not help) ` +
	`or "failed" (something went wrong; the body's "retryable" says whether to try again), with a stable reason code in _meta["toolgate/code"]. ` +
	`Paths are relative to the workspace. To stop and ask a person to decide, call toolgate.escalate when it is listed; it ends the turn.`
