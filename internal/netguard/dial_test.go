package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// fakeResolver answers from a table, and counts lookups. A name may have a sequence
// of answers (the last one repeats): that is how DNS rebinding is staged.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]string
	calls   map[string]int
}

func newResolver(m map[string][]string) *fakeResolver {
	r := &fakeResolver{answers: map[string][][]string{}, calls: map[string]int{}}
	for k, v := range m {
		r.answers[k] = [][]string{v}
	}
	return r
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.calls[host]
	r.calls[host]++
	seq, ok := r.answers[host]
	if !ok {
		return nil, fmt.Errorf("no such host %s", host)
	}
	ans := seq[min(n, len(seq)-1)]
	var out []netip.Addr
	for _, a := range ans {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

func (r *fakeResolver) lookups() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls {
		n += c
	}
	return n
}

// recordingGuard is a Guard whose connections are recorded and refused: it proves
// which addresses would have been dialled without sending anything anywhere.
func recordingGuard(p Policy, r Resolver) (*Guard, *[]string) {
	g := NewGuard(p, r)
	var mu sync.Mutex
	var dialled []string
	g.dial = func(ctx context.Context, d *net.Dialer, network, address string) (net.Conn, error) {
		mu.Lock()
		dialled = append(dialled, address)
		mu.Unlock()
		// Run the Control hook the real dialer would run on the socket.
		if err := d.ControlContext(ctx, network, address, nil); err != nil {
			return nil, err
		}
		return nil, errors.New("test: not connecting")
	}
	return g, &dialled
}

func TestDialRefusesBeforeDialing(t *testing.T) {
	res := newResolver(map[string][]string{
		"evil.test":        {"169.254.169.254"},
		"mapped.test":      {"::ffff:169.254.169.254"},
		"sixtofour.test":   {"2002:a9fe:a9fe::1"},
		"rebind.test":      {"127.0.0.1"},
		"allbad.test":      {"169.254.169.254", "fe80::1", "0.0.0.0", "::ffff:127.0.0.1"},
		"empty.test":       {},
		"mixed.test":       {"169.254.169.254", "93.184.216.34"},
		"localhost":        {"127.0.0.1", "10.0.0.1", "::1"},
		"public.test":      {"93.184.216.34", "::ffff:93.184.216.34", "93.184.216.34"},
		"metadata.example": {"93.184.216.34"},
	})
	for _, tc := range []struct {
		addr    string
		lookups int      // lookups the dial may make
		dials   []string // addresses it may try, in order
		is      error    // the error, when nothing may be dialled
	}{
		{"169.254.169.254:80", 0, nil, ErrDenied},
		{"[::ffff:169.254.169.254]:80", 0, nil, ErrDenied},
		{"[fe80::1%eth0]:80", 0, nil, ErrDenied},
		{"2852039166:80", 0, nil, ErrBadHost},
		{"0x7f.1:80", 0, nil, ErrBadHost},
		{"metadata.google.internal:80", 0, nil, ErrDenied},
		{"evil.test:80", 1, nil, ErrDenied},
		{"mapped.test:80", 1, nil, ErrDenied},
		{"sixtofour.test:80", 1, nil, ErrDenied},
		{"rebind.test:80", 1, nil, ErrDenied}, // a name resolving to loopback
		{"allbad.test:80", 1, nil, ErrDenied},
		{"empty.test:80", 1, nil, nil},
		{"nosuch.test:80", 1, nil, nil},
		{"mixed.test:443", 1, []string{"93.184.216.34:443"}, nil},
		{"localhost:7077", 1, []string{"127.0.0.1:7077", "[::1]:7077"}, nil},
		{"public.test:443", 1, []string{"93.184.216.34:443"}, nil},
	} {
		before := res.lookups()
		g, dialled := recordingGuard(Policy{}, res)
		_, err := g.DialContext(context.Background(), "tcp", tc.addr)
		if err == nil {
			t.Errorf("%s: dial succeeded", tc.addr)
		}
		if n := res.lookups() - before; n > tc.lookups {
			t.Errorf("%s: %d lookups, want at most %d", tc.addr, n, tc.lookups)
		}
		if fmt.Sprint(*dialled) != fmt.Sprint(tc.dials) && !(len(*dialled) == 0 && len(tc.dials) == 0) {
			t.Errorf("%s: dialled %v, want %v", tc.addr, *dialled, tc.dials)
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%s: %v, want %v", tc.addr, err, tc.is)
		}
	}
	g, dialled := recordingGuard(Policy{}, res)
	for _, bad := range []struct{ network, addr string }{{"udp", "93.184.216.34:53"}, {"unix", "/run/x.sock"}, {"tcp", "no-port"}, {"tcp", "[::1"}} {
		if _, err := g.DialContext(context.Background(), bad.network, bad.addr); err == nil {
			t.Errorf("%s %s accepted", bad.network, bad.addr)
		}
	}
	if len(*dialled) != 0 {
		t.Errorf("bad networks dialled %v", *dialled)
	}
}

// TestControlChecksTheSocket: the Control hook refuses an address that was not
// checked for the host, and one the policy refuses, whatever the resolver said.
func TestControlChecksTheSocket(t *testing.T) {
	g := NewGuard(Policy{}, newResolver(nil))
	h := Host{Name: "mcp.example.com"}
	ctl := g.controlFor(h, []netip.Addr{netip.MustParseAddr("93.184.216.34")})
	if err := ctl(context.Background(), "tcp4", "93.184.216.34:443", nil); err != nil {
		t.Errorf("checked address refused: %v", err)
	}
	for _, a := range []string{"169.254.169.254:443", "93.184.216.35:443", "127.0.0.1:443", "nonsense"} {
		if err := ctl(context.Background(), "tcp4", a, nil); err == nil {
			t.Errorf("Control let %s through", a)
		}
	}
	// The socket is checked against the policy itself too, not only against the list.
	if err := g.controlFor(h, []netip.Addr{netip.MustParseAddr("169.254.169.254")})(context.Background(), "tcp4", "169.254.169.254:80", nil); !errors.Is(err, ErrDenied) {
		t.Errorf("Control trusted its list over the policy: %v", err)
	}
	if err := g.Control("tcp4", "169.254.169.254:80", nil); !errors.Is(err, ErrDenied) {
		t.Errorf("Control(169.254.169.254) = %v", err)
	}
	if err := g.Control("tcp4", "127.0.0.1:80", nil); !errors.Is(err, ErrDenied) {
		t.Errorf("Control(127.0.0.1) under LoopbackNamed = %v", err)
	}
	if err := NewGuard(Policy{Loopback: LoopbackAllow}, nil).Control("tcp4", "127.0.0.1:80", nil); err != nil {
		t.Errorf("Control(127.0.0.1) under LoopbackAllow = %v", err)
	}
}

// TestControlOnARealSocket: a plain net.Dialer with the guard's Control hook cannot
// connect to a refused address: the listener never sees the connection.
func TestControlOnARealSocket(t *testing.T) {
	ln := listen(t)
	g := NewGuard(Policy{Loopback: LoopbackDeny}, nil)
	d := net.Dialer{Control: g.Control, Timeout: 5 * time.Second}
	if _, err := d.Dial("tcp", ln.Addr().String()); !errors.Is(err, ErrDenied) {
		t.Fatalf("dial = %v, want a refusal", err)
	}
	settle(t, ln, 0)
}

// TestRebindingBetweenDials: the resolver answers loopback first, then the metadata
// address. Each dial checks what it connects to, so the second never connects.
func TestRebindingBetweenDials(t *testing.T) {
	ln := listen(t)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	res := newResolver(nil)
	res.answers["rebind.test"] = [][]string{{"127.0.0.1"}, {"169.254.169.254"}}
	g := NewGuard(Policy{Loopback: LoopbackAllow}, res)
	c, err := g.DialContext(context.Background(), "tcp", "rebind.test:"+port)
	if err != nil {
		t.Fatalf("first dial: %v", err)
	}
	c.Close()
	g.dial = func(context.Context, *net.Dialer, string, string) (net.Conn, error) {
		t.Fatal("the rebound name was dialled")
		return nil, nil
	}
	if _, err := g.DialContext(context.Background(), "tcp", "rebind.test:"+port); !errors.Is(err, ErrDenied) {
		t.Fatalf("second dial = %v, want a refusal", err)
	}
	settle(t, ln, 1)
}

// countingListener is a loopback listener that counts what it accepts and signals
// each acceptance on got.
type countingListener struct {
	net.Listener
	mu  sync.Mutex
	n   int
	got chan struct{}
}

func (l *countingListener) accepted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

func listen(t *testing.T) *countingListener {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &countingListener{Listener: inner, got: make(chan struct{}, 64)}
	t.Cleanup(func() { inner.Close() })
	go func() {
		for {
			c, err := inner.Accept()
			if err != nil {
				return
			}
			l.mu.Lock()
			l.n++
			l.mu.Unlock()
			c.Close()
			l.got <- struct{}{}
		}
	}()
	return l
}

// settle proves that nothing but what the test dialled itself reached l: it makes
// one ordinary connection, waits for its acceptance, and checks the count is want+1
// (connections are accepted in order, so a refused dial that had connected anyway
// would have been counted first).
func settle(t *testing.T, l *countingListener, want int) {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	for range want + 1 {
		<-l.got
	}
	if n := l.accepted(); n != want+1 {
		t.Fatalf("the listener accepted %d connections, want %d", n-1, want)
	}
}
