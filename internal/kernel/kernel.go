package kernel

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
)

// AuditLog appends one event per decision. AppendAudit must return only once the event
// is durable: the kernel runs a tool only after the event allowing it was appended.
type AuditLog interface {
	AppendAudit(ctx context.Context, e *audit.Event) error
}

// Escalation is one request for a human decision, raised by toolgate.escalate.
type Escalation struct {
	ID, TurnID, CallID, Principal, Reason, Note string
	CreatedAt                                   time.Time
}

// EscalationLog records escalations for people to approve or deny.
type EscalationLog interface {
	RecordEscalation(ctx context.Context, e Escalation) error
}

// Options configures a Kernel.
type Options struct {
	// Audit receives every decision. Required.
	Audit AuditLog
	// Escalations records toolgate.escalate calls. Required.
	Escalations EscalationLog
	// HashArg turns one argument's value, in its canonical encoding (the bytes the
	// strict decoder wrote, internal/rpcwire), into the keyed hash the audit event
	// records for it (values that may be secret are never stored in clear;
	// audit.HashValue). Nil records no arguments.
	HashArg func(canonicalValue []byte) string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives internal failures that cannot reach a caller; nil discards.
	Logger *slog.Logger
}

// Kernel holds the tool registry, the compiled policy and the namespace switches, and
// opens turns over them. It is safe for concurrent use. Locks guard only in-memory
// swaps: none is held across I/O or a tool's Run.
type Kernel struct {
	opts Options
	log  *slog.Logger

	mu    sync.RWMutex
	tools map[string]*entry
	ids   []string // sorted registered ids
	gen   uint64   // bumped by every Register, ReplaceNamespace and RemoveNamespace
	// nspol holds the policies of namespaces replaced as a whole (namespace.go);
	// replaced, never modified.
	nspol map[string]NamespacePolicy

	cacheMu sync.Mutex
	cache   map[catalogKey]*catalog

	policy     atomic.Pointer[policy.Set]
	namespaces atomic.Pointer[map[string]bool]

	// calls are the calls in flight, for Shutdown (shutdown.go).
	calls inflight

	// outage thins the log while the audit store keeps failing (auditlog.go).
	outage auditOutage
}

// EscalateID is the canonical id of the escalation tool.
const EscalateID = "toolgate.escalate"

// New returns a kernel with toolgate.escalate registered and an empty (deny-all) policy.
func New(opts Options) (*Kernel, error) {
	if opts.Audit == nil || opts.Escalations == nil {
		return nil, errors.New("kernel: Options.Audit and Options.Escalations are required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	k := &Kernel{opts: opts, tools: map[string]*entry{}, log: opts.Logger}
	if k.log == nil {
		k.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	empty, _ := policy.Compile(nil)
	k.policy.Store(empty)
	k.namespaces.Store(&map[string]bool{})
	if err := k.Register(escalateTool()); err != nil {
		return nil, fmt.Errorf("kernel: registering %s: %w", EscalateID, err)
	}
	return k, nil
}

// Register adds tools, compiling each input schema once. Registering an id twice is an
// error; the whole batch is rejected if any tool is invalid.
func (k *Kernel) Register(tools ...*Tool) error {
	entries := make([]*entry, 0, len(tools))
	seen := map[string]bool{}
	for _, t := range tools {
		if t == nil {
			return fmt.Errorf("%w: nil tool", ErrInvalidTool)
		}
		e, err := compileEntry(t)
		if err != nil {
			return err
		}
		if seen[t.ID] {
			return fmt.Errorf("%w %q: registered twice", ErrInvalidTool, t.ID)
		}
		seen[t.ID] = true
		entries = append(entries, e)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, e := range entries {
		if _, dup := k.tools[e.tool.ID]; dup {
			return fmt.Errorf("%w %q: already registered", ErrInvalidTool, e.tool.ID)
		}
		if _, whole := k.nspol[e.ns]; whole {
			return fmt.Errorf("%w %q: namespace %q is an upstream server's, replaced whole (ReplaceNamespace)", ErrInvalidTool, e.tool.ID, e.ns)
		}
	}
	for _, e := range entries {
		k.tools[e.tool.ID] = e
		k.ids = append(k.ids, e.tool.ID)
	}
	slices.Sort(k.ids)
	k.gen++
	return nil
}

// SetGrants compiles grants into the policy new turns use. Turns already open keep their
// catalogue; their calls must from now on be allowed by both the policy they opened with
// and this one, so a revocation takes effect at the next call and nothing widens them.
func (k *Kernel) SetGrants(grants []policy.Grant) error {
	s, err := policy.Compile(grants)
	if err != nil {
		return fmt.Errorf("kernel: %w", err)
	}
	k.policy.Store(s)
	return nil
}

// SetPolicy installs an already compiled policy for new turns.
func (k *Kernel) SetPolicy(s *policy.Set) {
	if s != nil {
		k.policy.Store(s)
	}
}

// Decide decides r by the current policy alone. It is for what is not a tool call
// but is authorized by grants all the same (an upstream server's request to the
// client, docs/trust.md); the caller audits the decision.
func (k *Kernel) Decide(r policy.Request) policy.Decision {
	pol := k.policy.Load()
	if pol == nil {
		return policy.Decision{Reason: policy.ReasonNoGrant}
	}
	return pol.Decide(r)
}

// SetNamespaces replaces the namespace switches; a namespace absent from m is enabled.
func (k *Kernel) SetNamespaces(m map[string]bool) {
	c := make(map[string]bool, len(m))
	for ns, on := range m {
		c[ns] = on
	}
	k.namespaces.Store(&c)
}

// TurnOptions opens one turn.
type TurnOptions struct {
	Principal string
	// Transport is recorded in audit events ("stdio", "http", "api").
	Transport string
	// Namer maps a canonical id to the name published on this surface; nil publishes
	// canonical ids. It must be one-to-one over the catalogue.
	Namer func(canonicalID string) string
	// Alias reproduces a harness's display name, recorded in audit events only.
	Alias func(publishedName string) string
	// Capabilities narrow the turn: each is a tool pattern as grants write it ("*",
	// "ns.*", "ns.name"), optionally with ":read", ":write" or ":execute". When any are
	// given, the catalogue keeps only the tools some capability's pattern matches, and a
	// call must also match a capability's pattern and action (else outside_capability).
	// They never widen: the grants still decide everything they would decide without
	// them. Invalid syntax fails OpenTurn.
	Capabilities []string
	// ID, when set, is the turn's execution id instead of a new one: a session another
	// replica opened, served here, keeps its turn's id (docs/deployment.md). At most
	// 64 bytes.
	ID string
	// Selections bring tools of namespaces replaced with ReplaceNamespace into this
	// turn, ExplicitOnly ones included, beside what Capabilities cover (patterns
	// narrow; selections add). Each is decided when the turn opens, reported by
	// Turn.Selections and audited; a rejected one changes nothing.
	Selections []Selection
}

// OpenTurn resolves the principal's effective catalogue once — registered, namespace
// enabled, and usable under some grant — and returns the turn serving it.
func (k *Kernel) OpenTurn(ctx context.Context, o TurnOptions) (*Turn, error) {
	if o.Principal == "" {
		return nil, errors.New("kernel: opening a turn: principal is empty")
	}
	caps, err := policy.CompileCapabilities(o.Capabilities)
	if err != nil {
		return nil, fmt.Errorf("kernel: opening a turn for %q: %w", o.Principal, err)
	}
	if len(o.ID) > 64 {
		return nil, fmt.Errorf("kernel: opening a turn for %q: the turn id is over 64 bytes", o.Principal)
	}
	pol := k.policy.Load()
	nsp := k.namespaces.Load()
	k.mu.RLock()
	gen := k.gen
	nspol := k.nspol
	selected, sdiags := k.resolveSelections(o, pol, *nsp)
	k.mu.RUnlock()
	skey := selectionKey(selected)
	var c *catalog
	if o.Namer == nil {
		c = k.cacheGet(catalogKey{pol, nsp, gen, o.Principal, caps.Key(), skey})
	}
	if c == nil {
		var err error
		if c, gen, nspol, err = k.resolve(o, pol, *nsp, caps, selected); err != nil {
			return nil, err
		}
		if o.Namer == nil {
			k.cachePut(catalogKey{pol, nsp, gen, o.Principal, caps.Key(), skey}, c)
		}
	}
	id := o.ID
	if id == "" {
		id = newID("exec-")
	}
	t := &Turn{
		k:          k,
		id:         id,
		principal:  o.Principal,
		transport:  o.Transport,
		alias:      o.Alias,
		namer:      o.Namer,
		policy:     pol,
		caps:       caps,
		byName:     c.byName,
		sources:    c.sources,
		ns:         *nsp,
		nspol:      nspol,
		selected:   selected,
		selections: sdiags,
	}
	if err := k.auditSelections(ctx, t, sdiags); err != nil {
		return nil, fmt.Errorf("kernel: opening a turn for %q: recording its selections: %w", o.Principal, err)
	}
	t.list = &mcpspec.ToolList{Tools: c.tools, CatalogHash: c.hash, ExecutionID: t.id, Encoded: c.encoded}
	return t, nil
}

// catalog is one resolved catalogue. It is immutable once built, so turns opened under
// the same policy, namespace switches and registry share it.
type catalog struct {
	byName map[string]*entry
	tools  []json.RawMessage
	hash   string
	// sources are the distinct Source values of the published tools, in first-seen
	// order: which upstream servers a session of this catalogue may call.
	sources []string
	// encoded is tools as one JSON array (mcpspec.ToolList.Encoded).
	encoded json.RawMessage
}

// catalogKey identifies what a catalogue was resolved from: the compiled policy and
// namespace switches (replaced, never edited, on change), the registry generation, the
// principal and the capabilities' canonical form. Only canonical-name catalogues (no
// Namer) are cached.
type catalogKey struct {
	pol       *policy.Set
	ns        *map[string]bool
	gen       uint64
	principal string
	caps      string
	selected  string // selectionKey
}

// maxCachedCatalogs bounds the cache; past it the cache starts over.
const maxCachedCatalogs = 1024

func (k *Kernel) cacheGet(key catalogKey) *catalog {
	k.cacheMu.Lock()
	defer k.cacheMu.Unlock()
	return k.cache[key]
}

func (k *Kernel) cachePut(key catalogKey, c *catalog) {
	k.cacheMu.Lock()
	defer k.cacheMu.Unlock()
	if k.cache == nil || len(k.cache) >= maxCachedCatalogs {
		k.cache = make(map[catalogKey]*catalog)
	}
	k.cache[key] = c
}

// resolve applies the gates (registered, namespace enabled, usable under some grant),
// then the turn's capabilities (which can only remove tools) and selections (which
// only bring in selected tools the grants allow, ExplicitOnly ones included), and
// builds the published catalogue. It returns the registry generation and namespace
// policies it read.
func (k *Kernel) resolve(o TurnOptions, pol *policy.Set, ns map[string]bool, caps *policy.Capabilities, selected map[string]bool) (*catalog, uint64, map[string]NamespacePolicy, error) {
	k.mu.RLock()
	gen, nspol := k.gen, k.nspol
	var published []*entry
	for _, id := range k.ids {
		e := k.tools[id]
		np := nspol[e.ns]
		if on, ok := ns[e.ns]; np.Disabled || ok && !on {
			continue
		}
		if !pol.MayUse(o.Principal, id) {
			continue
		}
		if !selected[id] && (np.ExplicitOnly || !caps.Covers(id)) {
			continue
		}
		published = append(published, e)
	}
	k.mu.RUnlock()
	if len(published) > MaxCatalog {
		return nil, 0, nil, fmt.Errorf("kernel: opening a turn for %q: %w: %d tools would be published, the limit is %d (disable namespaces or narrow grants)",
			o.Principal, ErrCatalogTooLarge, len(published), MaxCatalog)
	}
	c := &catalog{byName: make(map[string]*entry, len(published))}
	c.tools = make([]json.RawMessage, 0, len(published))
	canon := make([][]byte, 0, len(published))
	for _, e := range published {
		name := e.tool.ID
		if o.Namer != nil {
			name = o.Namer(e.tool.ID)
		}
		if name == "" {
			return nil, 0, nil, fmt.Errorf("kernel: opening a turn: the namer gave %q an empty name", e.tool.ID)
		}
		if prev, dup := c.byName[name]; dup {
			return nil, 0, nil, fmt.Errorf("kernel: opening a turn: the namer maps both %q and %q to %q", prev.tool.ID, e.tool.ID, name)
		}
		c.byName[name] = e
		if !slices.Contains(c.sources, e.tool.Source) {
			c.sources = append(c.sources, e.tool.Source)
		}
		qn, _ := json.Marshal(name)
		obj := make([]byte, 0, len(qn)+len(e.rest)+10)
		obj = append(obj, `{"name":`...)
		obj = append(obj, qn...)
		obj = append(obj, ',')
		obj = append(obj, e.rest...)
		obj = append(obj, '}')
		c.tools = append(c.tools, obj)
		// Canonical entry: [name, sorted-key object without name].
		ce := make([]byte, 0, len(qn)+len(e.canon)+3)
		ce = append(ce, '[')
		ce = append(ce, qn...)
		ce = append(ce, ',')
		ce = append(ce, e.canon...)
		ce = append(ce, ']')
		canon = append(canon, ce)
	}
	c.hash = catalogHash(canon)
	c.encoded = encodeArray(c.tools)
	return c, gen, nspol, nil
}

// encodeArray joins the published tool objects (each built above, valid and compact)
// into one JSON array.
func encodeArray(tools []json.RawMessage) json.RawMessage {
	n := 2
	for _, t := range tools {
		n += len(t) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, t := range tools {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, t...)
	}
	return append(out, ']')
}

// catalogHash is SHA-256 over the canonical encodings of the published tools, sorted,
// as a JSON array: the same tool set gives the same hash whatever the order, execution
// id, transport or harness alias.
func catalogHash(canon [][]byte) string {
	sorted := slices.Clone(canon)
	slices.SortFunc(sorted, bytes.Compare)
	h := sha256.New()
	h.Write([]byte{'['})
	for i, c := range sorted {
		if i > 0 {
			h.Write([]byte{','})
		}
		h.Write(c)
	}
	h.Write([]byte{']'})
	return hex.EncodeToString(h.Sum(nil))
}
