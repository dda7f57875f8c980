package app

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/mcpspec"
)

// Resource subscriptions (docs/host.md, "Resource updates"): the hosting App keeps,
// per upstream connection and URI, the sessions (turns) that subscribed. The upstream
// is subscribed once per URI however many sessions subscribe, and unsubscribed when
// the last of them unsubscribes or its turn closes (an HTTP session's DELETE or
// expiry, a stdio connection's end). An upstream's notifications/resources/updated
// marks the URI pending for each subscribed session; one delivery pass, run while
// anything is pending, brings the policy up to date once and tells each session
// whose turn may still read the resource (kernel.Turn.MayRead: a revoked grant stops
// delivery) on the streams it watches with (mcpserver.ResourceWatcher). Pending
// updates are a set per session, bounded by its subscriptions, so a flood of updates
// for one URI costs one notification per pass, never a queue.

// maxSubscriptionsPerSession bounds the resources one session may subscribe to; a
// subscribe beyond it is refused (codeTooManySubscriptions).
const maxSubscriptionsPerSession = 256

// codeTooManySubscriptions answers a resources/subscribe beyond the session's cap
// (JSON-RPC's invalid request: the client must unsubscribe from something first).
const codeTooManySubscriptions = jsonrpc.CodeInvalidRequest

// subscriptionTimeout bounds an upstream unsubscribe made for a closed turn, which
// has no caller's context.
const subscriptionTimeout = 10 * time.Second

// subKey is one subscribed resource of one upstream connection: conn is "" for a
// server's shared connection, the turn id for a server of "session" isolation.
type subKey struct{ server, conn, uri string }

// subSession is one turn's subscriptions and the streams it is watched on.
type subSession struct {
	t        turn
	keys     map[subKey]struct{}
	inflight int // subscribes under way, counted against the cap
	closed   bool
	pending  map[subKey]struct{} // updates not yet delivered
	sinks    map[int]*resourceSink
	nextSink int
}

// resourceSink is one stream a session watches its updates on.
type resourceSink struct {
	mu      sync.Mutex // held while updated runs, so stop waits for it
	gone    bool
	updated func(uri string)
}

func (s *resourceSink) tell(uri string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.gone {
		s.updated(uri)
	}
}

// resourceSubs is an App's subscription table.
type resourceSubs struct {
	mu       sync.Mutex
	sessions map[string]*subSession     // by turn id
	subs     map[subKey]map[string]bool // subscribed keys → turn ids
	dirty    map[*subSession]struct{}   // sessions with pending updates
	running  bool                       // a delivery pass loop runs
	seed     maphash.Seed
	ops      [64]sync.Mutex // one per stripe of keys: a key's upstream (un)subscribe and table change happen together
	wg       sync.WaitGroup // unsubscribes of closed turns and delivery loops
}

// op is the lock serialising the upstream subscribe and unsubscribe of k with its
// table entry, so an upstream never sees them out of order. It is held across that
// one request only: other keys' operations and all deliveries go on meanwhile.
func (rs *resourceSubs) op(k subKey) *sync.Mutex {
	var h maphash.Hash
	h.SetSeed(rs.seed)
	h.WriteString(k.server)
	h.WriteByte(0)
	h.WriteString(k.conn)
	h.WriteByte(0)
	h.WriteString(k.uri)
	return &rs.ops[h.Sum64()%uint64(len(rs.ops))]
}

// sessionLocked returns t's entry, made on first use; nil once it closed.
func (rs *resourceSubs) sessionLocked(t turn) *subSession {
	id := t.ID()
	if ss, ok := rs.sessions[id]; ok {
		return ss
	}
	if t.cl != nil && t.cl.closed.Load() {
		return nil
	}
	if rs.sessions == nil {
		rs.sessions = map[string]*subSession{}
		rs.subs = map[subKey]map[string]bool{}
		rs.dirty = map[*subSession]struct{}{}
		rs.seed = maphash.MakeSeed()
	}
	ss := &subSession{t: t, keys: map[subKey]struct{}{}, pending: map[subKey]struct{}{}, sinks: map[int]*resourceSink{}}
	rs.sessions[id] = ss
	return ss
}

// connKey is the connection a subscription of t to server's resources lives on.
func (a *App) connKey(ctx context.Context, t turn, server string) string {
	m, ok := a.usync.server(ctx, server)
	if !ok {
		return ""
	}
	d, err := definition(&m)
	if err == nil && d.Isolation == host.IsolationSession {
		return t.ID()
	}
	return ""
}

// subscribe adds t's subscription to uri of server, subscribing the upstream when it
// is the connection's first; the answer is the upstream's, or {} when it was
// subscribed already.
func (t turn) subscribe(ctx context.Context, server, uri string, params json.RawMessage, peer mcpspec.Peer) (json.RawMessage, error) {
	rs := &t.a.rsubs
	k := subKey{server, t.a.connKey(ctx, t, server), uri}
	rs.mu.Lock()
	ss := rs.sessionLocked(t)
	if ss == nil {
		rs.mu.Unlock()
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "the session is over"}
	}
	if _, ok := ss.keys[k]; !ok && len(ss.keys)+ss.inflight >= maxSubscriptionsPerSession {
		rs.mu.Unlock()
		return nil, &jsonrpc.Error{Code: codeTooManySubscriptions,
			Message: fmt.Sprintf("too many subscriptions: a session may hold %d; unsubscribe from one first", maxSubscriptionsPerSession)}
	}
	ss.inflight++
	rs.mu.Unlock()
	defer func() {
		rs.mu.Lock()
		ss.inflight--
		rs.mu.Unlock()
	}()

	op := rs.op(k)
	op.Lock()
	defer op.Unlock()
	rs.mu.Lock()
	_, mine := ss.keys[k]
	live := len(rs.subs[k]) > 0
	rs.mu.Unlock()
	if mine {
		return json.RawMessage(`{}`), nil
	}
	res := json.RawMessage(`{}`)
	if !live {
		var err error
		if res, err = t.forward(ctx, server, mcpspec.MethodResourcesSubscribe, params, peer); err != nil {
			return nil, err
		}
	}
	rs.mu.Lock()
	if ss.closed {
		// The turn closed while the upstream was asked: undo it unless another holds it.
		last := len(rs.subs[k]) == 0
		rs.mu.Unlock()
		if last {
			t.a.unsubscribeUpstream(k, t.ID())
		}
		return res, nil
	}
	ss.keys[k] = struct{}{}
	if rs.subs[k] == nil {
		rs.subs[k] = map[string]bool{}
	}
	rs.subs[k][t.ID()] = true
	rs.mu.Unlock()
	return res, nil
}

// unsubscribe drops t's subscription to uri of server, unsubscribing the upstream
// when it was the last. One the session does not hold is answered {} and not
// relayed: another session's subscription on the same connection must not end.
func (t turn) unsubscribe(ctx context.Context, server, uri string, params json.RawMessage, peer mcpspec.Peer) (json.RawMessage, error) {
	rs := &t.a.rsubs
	k := subKey{server, t.a.connKey(ctx, t, server), uri}
	op := rs.op(k)
	op.Lock()
	defer op.Unlock()
	rs.mu.Lock()
	last := rs.dropLocked(k, t.ID())
	rs.mu.Unlock()
	if !last {
		return json.RawMessage(`{}`), nil
	}
	return t.forward(ctx, server, mcpspec.MethodResourcesUnsubscribe, params, peer)
}

// dropLocked removes id's subscription to k; true when id held it and was the last.
func (rs *resourceSubs) dropLocked(k subKey, id string) (last bool) {
	ss := rs.sessions[id]
	if ss != nil {
		delete(ss.keys, k)
		delete(ss.pending, k)
	}
	ids := rs.subs[k]
	if !ids[id] {
		return false
	}
	delete(ids, id)
	if len(ids) > 0 {
		return false
	}
	delete(rs.subs, k)
	return true
}

// unsubscribeUpstream tells k's server to stop sending updates of k.uri, on the
// connection of session id; failures are logged (the connection may be gone).
func (a *App) unsubscribeUpstream(k subKey, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), subscriptionTimeout)
	defer cancel()
	p, _ := json.Marshal(struct {
		URI string `json:"uri"`
	}{k.uri})
	if _, err := (turnCaller{a}).Call(ctx, k.server, mcpspec.MethodResourcesUnsubscribe, p, host.CallOptions{SessionKey: id}); err != nil {
		a.log.Warn("unsubscribing from an upstream resource", "server", k.server, "err", err)
	}
}

// endSubscriptions drops every subscription of the closing turn id, unsubscribing
// the upstream from the URIs it was the last to hold, on a goroutine of its own (a
// turn's Close does no I/O).
func (a *App) endSubscriptions(id string) {
	rs := &a.rsubs
	rs.mu.Lock()
	ss := rs.sessions[id]
	if ss == nil {
		rs.mu.Unlock()
		return
	}
	ss.closed = true
	delete(rs.sessions, id)
	delete(rs.dirty, ss)
	keys := make([]subKey, 0, len(ss.keys))
	for k := range ss.keys {
		keys = append(keys, k)
	}
	rs.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	rs.wg.Add(1)
	go func() {
		defer rs.wg.Done()
		for _, k := range keys {
			op := rs.op(k)
			op.Lock()
			rs.mu.Lock()
			ids := rs.subs[k]
			last := false
			if ids[id] {
				delete(ids, id)
				if len(ids) == 0 {
					delete(rs.subs, k)
					last = true
				}
			}
			rs.mu.Unlock()
			if last {
				a.unsubscribeUpstream(k, id)
			}
			op.Unlock()
		}
	}()
}

// WatchResources implements mcpserver.ResourceWatcher.
func (t turn) WatchResources(updated func(uri string)) (stop func()) {
	rs := &t.a.rsubs
	rs.mu.Lock()
	ss := rs.sessionLocked(t)
	if ss == nil {
		rs.mu.Unlock()
		return func() {}
	}
	id := ss.nextSink
	ss.nextSink++
	sink := &resourceSink{updated: updated}
	ss.sinks[id] = sink
	rs.mu.Unlock()
	return func() {
		rs.mu.Lock()
		delete(ss.sinks, id)
		rs.mu.Unlock()
		sink.mu.Lock()
		sink.gone = true
		sink.mu.Unlock()
	}
}

// UpstreamNotification takes what an upstream tells its client outside any call
// (host.Options.Notifications): a resource update is marked pending for each session
// subscribed to it on that connection. It returns at once.
func (a *App) UpstreamNotification(server, sessionKey, method string, params json.RawMessage) {
	if method != mcpspec.NotificationResourceUpdated {
		return
	}
	uri, ok := stringMember(params, "uri")
	if !ok {
		return
	}
	k := subKey{server, sessionKey, uri}
	rs := &a.rsubs
	rs.mu.Lock()
	defer rs.mu.Unlock()
	ids := rs.subs[k]
	if len(ids) == 0 {
		return
	}
	for id := range ids {
		ss := rs.sessions[id]
		if ss == nil || len(ss.sinks) == 0 {
			continue // no stream open: no backlog (as for list changes)
		}
		ss.pending[k] = struct{}{}
		rs.dirty[ss] = struct{}{}
	}
	if len(rs.dirty) > 0 && !rs.running {
		rs.running = true
		rs.wg.Add(1)
		go a.deliverUpdates()
	}
}

// deliverUpdates runs delivery passes until nothing is pending.
func (a *App) deliverUpdates() {
	rs := &a.rsubs
	defer rs.wg.Done()
	for {
		rs.mu.Lock()
		if len(rs.dirty) == 0 {
			rs.running = false
			rs.mu.Unlock()
			return
		}
		rs.mu.Unlock()
		a.updatePass()
	}
}

// updatePass brings the policy up to date once and tells each session with pending
// updates those of resources its turn may still read.
func (a *App) updatePass() {
	ctx, cancel := context.WithTimeout(context.Background(), subscriptionTimeout)
	defer cancel()
	if err := a.refresh(ctx); err != nil {
		a.log.Warn("re-reading grants for resource updates", "err", err)
	}
	type batch struct {
		t     turn
		keys  []subKey
		sinks []*resourceSink
	}
	rs := &a.rsubs
	rs.mu.Lock()
	batches := make([]batch, 0, len(rs.dirty))
	for ss := range rs.dirty {
		b := batch{t: ss.t}
		for k := range ss.pending {
			b.keys = append(b.keys, k)
		}
		clear(ss.pending)
		for _, f := range ss.sinks {
			b.sinks = append(b.sinks, f)
		}
		batches = append(batches, b)
	}
	clear(rs.dirty)
	rs.mu.Unlock()
	for _, b := range batches {
		for _, k := range b.keys {
			if !b.t.Turn.MayRead(resourceAccess(k.server, k.uri, "")) {
				continue
			}
			for _, f := range b.sinks {
				f.tell(k.uri)
			}
		}
	}
}
