package mcpserver

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/httpwire"
	"github.com/toolgate/toolgate/internal/mcpspec"
)

// The standalone GET stream of a Streamable HTTP session (2025-03-26 and later;
// docs/http-contract.md, "The GET stream"): one per session, carrying what the
// server tells the session unprompted — today the list_changed notifications of
// the lists a ListWatcher Turn reports changed. A session keeps no backlog: a
// change while no stream is open is not told (the client lists when it opens
// one), and a change while one is open is a bit in a mask until the stream's
// writer takes it, so a burst of changes is one notification per list and a
// client that never reads costs the server nothing that grows: its stream's
// write runs out of the write timeout and the stream ends.

// ListKind names the lists whose changes a session is told of (mcpspec's).
type ListKind = mcpspec.ListKind

// The lists a ListWatcher reports.
const (
	ToolsList     = mcpspec.ToolsList
	ResourcesList = mcpspec.ResourcesList
	PromptsList   = mcpspec.PromptsList
)

// listNotifications are the notifications of each list, in the order a stream
// writes them.
var listNotifications = []struct {
	kind ListKind
	msg  []byte
}{
	{ToolsList, []byte(`{"jsonrpc":"2.0","method":"` + mcpspec.NotificationToolsListChanged + `"}`)},
	{ResourcesList, []byte(`{"jsonrpc":"2.0","method":"` + mcpspec.NotificationResourcesListChanged + `"}`)},
	{PromptsList, []byte(`{"jsonrpc":"2.0","method":"` + mcpspec.NotificationPromptsListChanged + `"}`)},
}

// ListWatcher is a Turn that can tell when what a session of it sees has changed.
// WatchLists starts telling changed, with the lists among kinds whose visible
// content differs from what the session last saw (never a list that did not
// change), until stop is called; stop returns once no call of changed runs or
// will run. changed must return at once (it only marks the session's stream).
// kinds holds ToolsList only where the session's tools can change: a Handler's
// session, which its StaleTurn ends at its next request (the client initializes
// again and lists the new catalogue); a Bridge serves one catalogue, so its
// sessions watch resources and prompts only.
type ListWatcher interface {
	WatchLists(kinds ListKind, changed func(ListKind)) (stop func())
}

// asListWatcher returns the ListWatcher behind t.
func asListWatcher(t Turn) (ListWatcher, bool) {
	if s, ok := t.(sharedTurn); ok {
		t = s.Turn
	}
	w, ok := t.(ListWatcher)
	return w, ok
}

// pushedLists are the lists whose changes reach conn c's session: what its
// transport delivers (c.pushes) where its Turn watches them and its era has a
// GET stream. initialize advertises listChanged by it.
func (c *conn) pushedLists(version string) ListKind {
	if _, ok := asListWatcher(c.turn); !ok || (!c.pushAnyEra && !hasGetStream(version)) {
		return 0
	}
	return c.pushes
}

// hasGetStream reports whether a session of version has a standalone GET stream:
// Streamable HTTP (2025-03-26 and later); 2024-11-05 spoke HTTP+SSE, and the
// 2026-07-28 revision has none (subscriptions/listen replaces it).
func hasGetStream(version string) bool {
	return version != "" && version != "2024-11-05" && version != mcpspec.ModernVersion
}

// refuseStreamConflict answers a GET naming a session whose stream is open.
var refuseStreamConflict = httpwire.Refusal{Status: http.StatusConflict, Code: "stream_conflict"}

// outbox is a session's side of its GET stream: whether one is open, and the
// list changes it has still to write.
type outbox struct {
	mu      sync.Mutex
	open    bool
	pending ListKind
	uris    map[string]struct{} // resource updates still to write (resourcewatch.go)
	order   []string            // the same, in the order they came
	wake    chan struct{}       // capacity 1: a change is waiting
}

// claim opens the session's one stream; false when one is open.
func (o *outbox) claim() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.open {
		return false
	}
	o.open, o.pending, o.uris, o.order = true, 0, nil, nil
	if o.wake == nil {
		o.wake = make(chan struct{}, 1)
	}
	return true
}

func (o *outbox) unclaim() {
	o.mu.Lock()
	o.open, o.pending, o.uris, o.order = false, 0, nil, nil
	o.mu.Unlock()
}

// post marks lists changed for the open stream; nothing without one.
func (o *outbox) post(k ListKind) {
	o.mu.Lock()
	if !o.open || k == 0 {
		o.mu.Unlock()
		return
	}
	o.pending |= k
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// take returns and clears the pending changes.
func (o *outbox) take() ListKind {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := o.pending
	o.pending = 0
	return k
}

// serveGet answers a GET on the endpoint: the session's standalone stream, held
// until the client goes away, the session ends (DELETE, expiry, eviction, the
// server closing) or a write fails. It counts as a request in flight only until
// the stream is open; the session stays in use (never reaped) while it is.
func (c *httpCore) serveGet(w *trackingWriter, r *http.Request, principal string) {
	if !c.inflight.acquire(principal) {
		writeRefusalRetry(w, refuseTooManyRequests, time.Second)
		return
	}
	sess, version, ref := c.getSession(r, principal)
	c.inflight.release(principal)
	if ref != refuseNone {
		writeRefusal(w, ref)
		return
	}
	defer sess.release()
	if !sess.out.claim() {
		writeRefusal(w, refuseStreamConflict)
		return
	}
	defer sess.out.unclaim()
	stream := newSSEStream(w, sess.id, func(err error) { c.dropped(err) })
	if stream.start() != nil {
		return
	}
	if lw, ok := asListWatcher(sess.turn); ok {
		if kinds := sess.conn.pushedLists(version); kinds != 0 {
			stop := lw.WatchLists(kinds, sess.out.post)
			defer stop()
		}
	}
	defer watchResources(sess.turn, &sess.out)()
	var tick <-chan time.Time
	if c.keepAlive > 0 {
		t := time.NewTicker(c.keepAlive)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-sess.ended:
			return
		case <-stream.failed:
			return
		case <-tick:
			stream.comment()
		case <-sess.out.wake:
			k := sess.out.take()
			for _, n := range listNotifications {
				if k&n.kind != 0 && stream.send(n.msg) != nil {
					return
				}
			}
			if !writeUpdates(&sess.out, stream.send) {
				return
			}
		}
	}
}

// getSession finds the live session a GET may open a stream on, acquired: the
// one it names (404 when unknown), else the one serving requests that name none
// (a Bridge's; 400 missing_session without), and only a session of an era with
// a stream that accepts one (405 otherwise, as for a server without any).
func (c *httpCore) getSession(r *http.Request, principal string) (*httpSession, string, refusal) {
	hv := r.Header.Values(headerProtocolVersion)
	if len(hv) > 1 {
		return nil, "", refuseBadProtocolVersion
	}
	var version string
	if len(hv) == 1 {
		version = strings.TrimSpace(hv[0])
		if version == mcpspec.ModernVersion && c.stateless {
			return nil, "", refuseMethodNotAllowed // that era has no GET stream
		}
		if !mcpspec.IsSessionVersion(version) {
			return nil, "", refuseBadProtocolVersion
		}
	}
	if !acceptsSSE(r) {
		return nil, "", refuseMethodNotAllowed
	}
	var sess *httpSession
	if ids, named := r.Header[headerSessionID]; named {
		if len(ids) != 1 {
			return nil, "", refuseUnknownSession
		}
		sess = c.store.lookup(r.Context(), ids[0], principal)
		if sess == nil {
			return nil, "", refuseUnknownSession
		}
	} else if sess = c.store.implicit(principal, false); sess == nil {
		return nil, "", refuseMissingSession
	}
	if !sess.acquire() {
		return nil, "", refuseUnknownSession
	}
	sess.conn.mu.Lock()
	initialized, negotiated := sess.conn.initialized, sess.conn.version
	sess.conn.mu.Unlock()
	if negotiated == "" {
		// A session resumed from another replica: its version is the header's,
		// or 2025-03-26 without one (as the transport says to assume).
		negotiated = version
		if negotiated == "" {
			negotiated = "2025-03-26"
		}
	}
	if !initialized || !hasGetStream(negotiated) {
		sess.release()
		return nil, "", refuseMethodNotAllowed
	}
	return sess, negotiated, refuseNone
}
