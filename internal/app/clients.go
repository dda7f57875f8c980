package app

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Client is one open turn as server.list_clients reports it: a harness session of
// toolgate mcp, a bridge, a /mcp session of toolgate serve, or one HTTP API request
// while it runs. A bridge's sessions share its one turn, so it shows the client whose
// initialize came last.
type Client struct {
	TurnID          string          `json:"turn_id"`
	Principal       string          `json:"principal"`
	Transport       string          `json:"transport"`
	ProtocolVersion string          `json:"protocol_version,omitempty"`
	ClientInfo      json.RawMessage `json:"client_info,omitempty"`
	Opened          time.Time       `json:"opened"`
	LastCall        *time.Time      `json:"last_call,omitempty"`
	Calls           int64           `json:"calls"`
}

// maxClientInfo bounds the clientInfo kept per client: it is the client's to write.
const maxClientInfo = 1024

// clientEntry is one open turn's record; calls and lastCall are counted without a lock.
type clientEntry struct {
	id, principal, transport string
	opened                   time.Time
	calls                    atomic.Int64
	lastCall                 atomic.Int64 // unix nanoseconds; 0: none
	// upstream is set once the turn called an upstream server's tool: its close ends
	// the connections a server of "session" isolation opened for it.
	upstream atomic.Bool
	// closed is set when the turn closes: it takes no subscription after
	// (resourcesubs.go).
	closed atomic.Bool

	mu      sync.Mutex
	version string
	info    json.RawMessage
}

func (e *clientEntry) called() {
	if e == nil {
		return
	}
	e.calls.Add(1)
	e.lastCall.Store(time.Now().UnixNano())
}

// clients are the App's open turns, by turn id. Entries are added when a turn opens
// and removed when it closes, so the set is bounded by the surfaces' own caps.
type clients struct {
	mu sync.Mutex
	m  map[string]*clientEntry
}

func (c *clients) add(id, principal, transport string) *clientEntry {
	e := &clientEntry{id: id, principal: principal, transport: transport, opened: time.Now().UTC()}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*clientEntry{}
	}
	c.m[id] = e
	return e
}

// usedUpstream marks the turn id as having called an upstream server.
func (c *clients) usedUpstream(id string) {
	c.mu.Lock()
	e := c.m[id]
	c.mu.Unlock()
	if e != nil {
		e.upstream.Store(true)
	}
}

func (c *clients) remove(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}

// Clients lists the open turns, oldest first.
func (a *App) Clients() []Client {
	a.cl.mu.Lock()
	entries := make([]*clientEntry, 0, len(a.cl.m))
	for _, e := range a.cl.m {
		entries = append(entries, e)
	}
	a.cl.mu.Unlock()
	out := make([]Client, 0, len(entries))
	for _, e := range entries {
		c := Client{TurnID: e.id, Principal: e.principal, Transport: e.transport, Opened: e.opened, Calls: e.calls.Load()}
		if n := e.lastCall.Load(); n != 0 {
			t := time.Unix(0, n).UTC()
			c.LastCall = &t
		}
		e.mu.Lock()
		c.ProtocolVersion, c.ClientInfo = e.version, e.info
		e.mu.Unlock()
		out = append(out, c)
	}
	slices.SortFunc(out, func(x, y Client) int {
		if c := x.Opened.Compare(y.Opened); c != 0 {
			return c
		}
		return strings.Compare(x.TurnID, y.TurnID)
	})
	return out
}

// NoteClient records the handshake of the session the turn serves
// (mcpserver.ClientNoter).
func (t turn) NoteClient(version string, info json.RawMessage) {
	if t.cl == nil {
		return
	}
	if len(info) > maxClientInfo || !json.Valid(info) {
		info = nil
	}
	t.cl.mu.Lock()
	defer t.cl.mu.Unlock()
	t.cl.version, t.cl.info = version, info
}

// endSessionTimeout bounds telling the host that a turn's session ended.
const endSessionTimeout = 5 * time.Second

// Close ends the turn and drops it from the open turns and its resource
// subscriptions (the upstream is unsubscribed from those it held last). If the turn called an
// upstream server, the host is told its session ended (hostrelay EndSession: a
// server of "session" isolation stops the process it started for this turn); that
// runs on its own, since over the relay it is a request.
func (t turn) Close() error {
	if t.cl != nil {
		t.cl.closed.Store(true)
		t.a.endSubscriptions(t.cl.id)
		t.a.cl.remove(t.cl.id)
		if up := t.a.ut.up; up != nil && t.cl.upstream.Swap(false) {
			id := t.cl.id
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), endSessionTimeout)
				defer cancel()
				if err := up.EndSession(ctx, id); err != nil {
					t.a.log.Warn("ending a turn's upstream sessions", "turn", id, "err", err)
				}
			}()
		}
	}
	return t.Turn.Close()
}
