package hostrelay

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/host/hosttest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// fakeHost returns a NewHostFunc over the fake dialer d with defs installed; no idle
// stop and no health pings, so what runs is what the test started.
func fakeHost(d *hosttest.Dialer, defs ...host.Definition) NewHostFunc {
	return func(ctx context.Context, obs host.Observer) (*host.Host, error) {
		return host.New(host.Options{
			Dialer: d, Observer: obs, Servers: defs,
			IdleTimeout: -1, Health: host.HealthPolicy{Interval: -1},
		})
	}
}

func def(name string) host.Definition {
	return host.Definition{Name: name, Fingerprint: "sha256:" + name}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// open opens a Node on dir and closes it when the test ends.
func open(t testing.TB, dir string, opts Options) *Node {
	t.Helper()
	n, err := Open(testCtx(t), dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := n.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return n
}

// pair opens a hosting Node over d and a relaying one on the same data directory.
func pair(t testing.TB, d *hosttest.Dialer, defs ...host.Definition) (hosting, relaying *Node, dir string) {
	t.Helper()
	dir = testenv.PrivateDir(t)
	hosting = open(t, dir, Options{NewHost: fakeHost(d, defs...)})
	if !hosting.Stats().Hosting {
		t.Fatal("the first Node does not host")
	}
	relaying = open(t, dir, Options{NewHost: func(context.Context, host.Observer) (*host.Host, error) {
		t.Error("a second Node built a host while the first holds the lock")
		return nil, context.Canceled
	}})
	if st := relaying.Stats(); st.Hosting {
		t.Fatal("the second Node hosts too")
	}
	return hosting, relaying, dir
}

// echoParams makes server answer every call with its params, byte for byte.
func echoParams(d *hosttest.Dialer, server string) {
	d.Server(server).Set(func(b *hosttest.Behavior) {
		b.Handler = func(_ context.Context, _ string, params json.RawMessage) (json.RawMessage, error) {
			return params, nil
		}
	})
}

// recorder is a Watcher that keeps what it got: as a watcher should, it starts over
// at each Resync (events holds what came after the last one, whose snapshot is base).
type recorder struct {
	mu      sync.Mutex
	events  []any
	all     []any // every event, across resyncs
	base    host.Snapshot
	resyncs int
	wake    chan struct{}
}

func newRecorder() *recorder { return &recorder{wake: make(chan struct{}, 1)} }

func (r *recorder) add(f func()) {
	r.mu.Lock()
	f()
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *recorder) record(ev any) {
	r.add(func() {
		r.events = append(r.events, ev)
		r.all = append(r.all, ev)
	})
}

func (r *recorder) ServerChanged(e host.ServerEvent)   { r.record(e) }
func (r *recorder) StateChanged(e host.StateEvent)     { r.record(e) }
func (r *recorder) CatalogChanged(e host.CatalogEvent) { r.record(e) }
func (r *recorder) Resync(s host.Snapshot) {
	r.add(func() {
		r.resyncs++
		r.base = s
		r.events = nil
	})
}

// checkConsecutive reports events since the last resync that do not follow it one by
// one.
func (r *recorder) checkConsecutive(t testing.TB, name string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	last := r.base.Version
	for _, ev := range r.events {
		if s := seqOf(ev); s != last+1 {
			t.Errorf("%s: event %+v follows seq %d", name, ev, last)
		}
		last = seqOf(ev)
	}
}

// waitFor waits until cond (read under the recorder's lock) holds.
func (r *recorder) waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		r.mu.Lock()
		ok := cond()
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.wake:
		case <-deadline:
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("waiting for %s: got events %+v, resyncs %d", what, r.events, r.resyncs)
		}
	}
}

// raw is a hand-driven connection to a relay socket.
type raw struct {
	t  testing.TB
	nc net.Conn
	r  *bufio.Reader
}

func dialRaw(t testing.TB, n *Node) *raw {
	t.Helper()
	nc, err := net.Dial("unix", n.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &raw{t: t, nc: nc, r: bufio.NewReaderSize(nc, 1<<20)}
}

func (r *raw) send(line string) {
	r.t.Helper()
	r.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.nc.Write([]byte(line + "\n")); err != nil {
		if len(line) > 200 {
			line = line[:200] + "…"
		}
		r.t.Fatalf("writing %q: %v", line, err)
	}
}

// recv reads one line; "" when the connection ended.
func (r *raw) recv() string {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := r.r.ReadString('\n')
	if err != nil {
		return ""
	}
	return line[:len(line)-1]
}

func (r *raw) hello() {
	r.t.Helper()
	r.send(`{"jsonrpc":"2.0","id":1,"method":"hello","params":{"protocol":1,"pid":1,"max_message_bytes":33554432}}`)
	if got := r.recv(); !json.Valid([]byte(got)) || !strings.Contains(got, `"protocol":1`) {
		r.t.Fatalf("hello answered %q", got)
	}
}
