// Package hosttest provides in-memory fakes of the host's consumer interfaces — a
// Dialer whose upstreams can be told to be slow, hang, crash, refuse credentials or
// change their catalogue, an Observer that records and checks every event, and a
// CatalogStore — for tests of internal/host and of what is built on it. Fakes wait on
// timers and channels only, so under testing/synctest their delays cost no real time.
package hosttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/internal/host"
)

// ErrEnded is what calls on an ended session fail with (wrapping the session's Err).
var ErrEnded = errors.New("hosttest: session ended")

// ErrClosed is the Err of a session that Close ended.
var ErrClosed = errors.New("hosttest: session closed")

// DefaultInfo is the handshake of a fake upstream whose Behavior sets none: it
// advertises tools, resources and prompts.
var DefaultInfo = host.SessionInfo{
	ProtocolVersion: "2025-06-18",
	ServerInfo:      json.RawMessage(`{"name":"fake","version":"1.0.0"}`),
	Capabilities:    json.RawMessage(`{"tools":{"listChanged":true},"resources":{"listChanged":true},"prompts":{}}`),
}

// Behavior is how one fake upstream behaves. Server.Set changes it at any time; each
// operation reads it when it starts.
type Behavior struct {
	// Dial: wait DialDelay, then fail with DialErr if set. DialHang blocks until the
	// dial's context ends.
	DialDelay time.Duration
	DialErr   error
	DialHang  bool
	// Info is the handshake outcome (zero: DefaultInfo).
	Info host.SessionInfo

	// Lists answered for tools/list, resources/list, resources/templates/list and
	// prompts/list, PageSize items per page (0: one page) with nextCursor.
	Tools, Resources, ResourceTemplates, Prompts []json.RawMessage
	PageSize                                     int
	// ListErr fails a list method; ListRaw answers it with these bytes instead;
	// ListHang makes every list call wait until ctx or the session ends.
	ListErr  map[string]error
	ListRaw  map[string]json.RawMessage
	ListHang bool

	// Other calls: send Progress notifications to the caller's Progress hook, wait
	// CallDelay (CallHang: until ctx ends or the session ends), then Handler's answer,
	// or the params echoed back as {"echo":params}.
	Progress  []json.RawMessage
	CallDelay time.Duration
	CallHang  bool
	Handler   func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	// HandlerOpts, when set, answers instead of Handler and gets the call's options
	// too: it may send the upstream's own requests to the caller (opts.Request).
	HandlerOpts func(ctx context.Context, method string, params json.RawMessage, opts host.CallOptions) (json.RawMessage, error)

	// Ping: wait PingDelay (PingHang: until ctx ends), then PingErr.
	PingDelay time.Duration
	PingErr   error
	PingHang  bool

	// Close: wait CloseDelay (CloseHang: until ctx ends) after ending the session.
	CloseDelay time.Duration
	CloseHang  bool

	Stderr string
}

// Server is one fake upstream's behaviour, shared by all its sessions.
type Server struct {
	name string
	mu   sync.Mutex
	b    Behavior
}

// Set changes the behaviour.
func (s *Server) Set(f func(b *Behavior)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.b)
}

func (s *Server) behavior() Behavior {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b
}

// Dialer is a fake host.Dialer. It counts dials and open sessions per server (open:
// returned by Dial and not yet closed — a crashed session stays open until the host
// closes it, as an unreaped process would).
type Dialer struct {
	mu         sync.Mutex
	servers    map[string]*Server
	sessions   map[string][]*Session
	dials      map[string]int
	open       map[string]int
	maxOpen    map[string]int
	violations []string
}

// NewDialer returns a Dialer whose servers all behave well until told otherwise.
func NewDialer() *Dialer {
	return &Dialer{
		servers: map[string]*Server{}, sessions: map[string][]*Session{},
		dials: map[string]int{}, open: map[string]int{}, maxOpen: map[string]int{},
	}
}

// Server returns the behaviour of the named upstream, creating it on first use.
func (d *Dialer) Server(name string) *Server {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.servers[name]
	if s == nil {
		s = &Server{name: name}
		d.servers[name] = s
	}
	return s
}

// Dial implements host.Dialer.
func (d *Dialer) Dial(ctx context.Context, req host.DialRequest) (host.Session, error) {
	srv := d.Server(req.Server)
	b := srv.behavior()
	d.mu.Lock()
	d.dials[req.Server]++
	d.mu.Unlock()
	if b.DialHang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if err := sleep(ctx, b.DialDelay, nil); err != nil {
		return nil, err
	}
	if b.DialErr != nil {
		return nil, b.DialErr
	}
	s := &Session{d: d, srv: srv, Key: req.SessionKey, Config: req.Config, notify: req.Notify, done: make(chan struct{}), lists: map[string]int{}}
	s.info = b.Info
	if s.info.ProtocolVersion == "" && s.info.Capabilities == nil {
		s.info = DefaultInfo
	}
	d.mu.Lock()
	d.sessions[req.Server] = append(d.sessions[req.Server], s)
	d.open[req.Server]++
	d.maxOpen[req.Server] = max(d.maxOpen[req.Server], d.open[req.Server])
	d.mu.Unlock()
	return s, nil
}

// Dials is how many times Dial was called for server.
func (d *Dialer) Dials(server string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dials[server]
}

// Open is how many of server's sessions are not closed.
func (d *Dialer) Open(server string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.open[server]
}

// MaxOpen is the most sessions of server that were ever open at once.
func (d *Dialer) MaxOpen(server string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.maxOpen[server]
}

// Sessions returns every session dialled for server, oldest first.
func (d *Dialer) Sessions(server string) []*Session {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*Session(nil), d.sessions[server]...)
}

// Last returns server's newest session, or nil.
func (d *Dialer) Last(server string) *Session {
	ss := d.Sessions(server)
	if len(ss) == 0 {
		return nil
	}
	return ss[len(ss)-1]
}

// Unclosed returns every session, of any server, that was never closed.
func (d *Dialer) Unclosed() []*Session {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*Session
	for _, ss := range d.sessions {
		for _, s := range ss {
			if !s.closed.Load() {
				out = append(out, s)
			}
		}
	}
	return out
}

// Violations lists breaches of the Session contract by the host (a session closed
// twice).
func (d *Dialer) Violations() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.violations...)
}

// Session is a fake host.Session.
type Session struct {
	d      *Dialer
	srv    *Server
	Key    string // the DialRequest's SessionKey
	Config any    // the DialRequest's Config
	notify func(string, json.RawMessage)
	info   host.SessionInfo

	done    chan struct{}
	endOnce sync.Once
	errMu   sync.Mutex
	err     error

	closed     atomic.Bool
	closeCalls atomic.Int32
	calls      atomic.Int64
	pings      atomic.Int64
	listMu     sync.Mutex
	lists      map[string]int
}

// Crash ends the session as a dying process would: Done closes and pending calls fail
// at once. It stays open (unreaped) until the host closes it.
func (s *Session) Crash(err error) {
	if err == nil {
		err = errors.New("hosttest: upstream exited")
	}
	s.end(err)
}

// Notify sends an upstream notification (e.g. notifications/tools/list_changed) to the
// host's hook.
func (s *Session) Notify(method string) { s.notify(method, nil) }

// Closed reports whether Close returned.
func (s *Session) Closed() bool { return s.closed.Load() }

// Calls is the number of non-list calls started; Pings the number of pings.
func (s *Session) Calls() int64 { return s.calls.Load() }
func (s *Session) Pings() int64 { return s.pings.Load() }

// ListCalls is how many pages of method were requested.
func (s *Session) ListCalls(method string) int {
	s.listMu.Lock()
	defer s.listMu.Unlock()
	return s.lists[method]
}

func (s *Session) end(err error) {
	s.endOnce.Do(func() {
		s.errMu.Lock()
		s.err = err
		s.errMu.Unlock()
		close(s.done)
	})
}

func (s *Session) endErr() error { return fmt.Errorf("%w: %w", ErrEnded, s.Err()) }

// sleep waits d (forever when hang), or until ctx ends or done closes.
func sleep(ctx context.Context, d time.Duration, done <-chan struct{}) error {
	var t <-chan time.Time
	if d > 0 {
		tm := time.NewTimer(d)
		defer tm.Stop()
		t = tm.C
	} else if d == 0 {
		return ctx.Err()
	}
	select {
	case <-t:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-done:
		return ErrEnded
	}
}

func (s *Session) wait(ctx context.Context, d time.Duration, hang bool) error {
	if hang {
		d = -1
	}
	if err := sleep(ctx, d, s.done); err != nil {
		if errors.Is(err, ErrEnded) {
			return s.endErr()
		}
		return err
	}
	return nil
}

// Info implements host.Session.
func (s *Session) Info() host.SessionInfo { return s.info }

// Call implements host.Session.
func (s *Session) Call(ctx context.Context, method string, params json.RawMessage, opts host.CallOptions) (json.RawMessage, error) {
	select {
	case <-s.done:
		return nil, s.endErr()
	default:
	}
	b := s.srv.behavior()
	if items, field, ok := listOf(&b, method); ok {
		return s.list(ctx, method, field, items, params, &b)
	}
	s.calls.Add(1)
	if opts.Progress != nil {
		for _, p := range b.Progress {
			opts.Progress(p)
		}
	}
	if err := s.wait(ctx, b.CallDelay, b.CallHang); err != nil {
		return nil, err
	}
	if b.HandlerOpts != nil {
		return b.HandlerOpts(ctx, method, params, opts)
	}
	if b.Handler != nil {
		return b.Handler(ctx, method, params)
	}
	if len(params) == 0 {
		params = json.RawMessage("null")
	}
	return json.RawMessage(`{"echo":` + string(params) + `}`), nil
}

func listOf(b *Behavior, method string) ([]json.RawMessage, string, bool) {
	switch method {
	case "tools/list":
		return b.Tools, "tools", true
	case "resources/list":
		return b.Resources, "resources", true
	case "resources/templates/list":
		return b.ResourceTemplates, "resourceTemplates", true
	case "prompts/list":
		return b.Prompts, "prompts", true
	}
	return nil, "", false
}

// list answers one page, splicing the items' bytes verbatim.
func (s *Session) list(ctx context.Context, method, field string, items []json.RawMessage, params json.RawMessage, b *Behavior) (json.RawMessage, error) {
	s.listMu.Lock()
	s.lists[method]++
	s.listMu.Unlock()
	if b.ListHang {
		if err := s.wait(ctx, 0, true); err != nil {
			return nil, err
		}
	}
	if err := b.ListErr[method]; err != nil {
		return nil, err
	}
	if raw, ok := b.ListRaw[method]; ok {
		return raw, nil
	}
	var p struct {
		Cursor string `json:"cursor"`
	}
	if len(params) > 0 {
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, fmt.Errorf("hosttest: bad list params: %w", err)
		}
	}
	off := 0
	if p.Cursor != "" {
		n, err := strconv.Atoi(p.Cursor)
		if err != nil || n < 0 || n > len(items) {
			return nil, fmt.Errorf("hosttest: bad cursor %q", p.Cursor)
		}
		off = n
	}
	end := len(items)
	if b.PageSize > 0 && off+b.PageSize < end {
		end = off + b.PageSize
	}
	parts := make([]string, 0, end-off)
	for _, it := range items[off:end] {
		parts = append(parts, string(it))
	}
	out := `{"` + field + `":[` + strings.Join(parts, ",") + `]`
	if end < len(items) {
		out += `,"nextCursor":"` + strconv.Itoa(end) + `"`
	}
	return json.RawMessage(out + "}"), nil
}

// Ping implements host.Session.
func (s *Session) Ping(ctx context.Context) error {
	select {
	case <-s.done:
		return s.endErr()
	default:
	}
	s.pings.Add(1)
	b := s.srv.behavior()
	if err := s.wait(ctx, b.PingDelay, b.PingHang); err != nil {
		return err
	}
	return b.PingErr
}

// Close implements host.Session: it ends the session, then takes CloseDelay (or hangs
// until ctx ends) as a slow process exit would.
func (s *Session) Close(ctx context.Context) error {
	if s.closeCalls.Add(1) > 1 {
		s.d.mu.Lock()
		s.d.violations = append(s.d.violations, fmt.Sprintf("session of %s (key %q) closed twice", s.srv.name, s.Key))
		s.d.mu.Unlock()
		return nil
	}
	s.end(ErrClosed)
	b := s.srv.behavior()
	d := b.CloseDelay
	if b.CloseHang {
		d = -1
	}
	err := sleep(ctx, d, nil)
	s.closed.Store(true)
	s.d.mu.Lock()
	s.d.open[s.srv.name]--
	s.d.mu.Unlock()
	return err
}

// Done implements host.Session.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err implements host.Session.
func (s *Session) Err() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err
}

// StderrTail implements host.Session.
func (s *Session) StderrTail() string { return s.srv.behavior().Stderr }

var (
	_ host.Dialer  = (*Dialer)(nil)
	_ host.Session = (*Session)(nil)
)
