package app

import (
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

// Close ends the turn and drops it from the open turns.
func (t turn) Close() error {
	if t.cl != nil {
		t.a.cl.remove(t.cl.id)
	}
	return t.Turn.Close()
}
