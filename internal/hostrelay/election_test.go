package hostrelay

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/datadir"
	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/host/hosttest"
	"github.com/toolgate/toolgate/internal/testenv"
)

func TestRelayOnly(t *testing.T) {
	dir := testenv.PrivateDir(t)
	if _, err := Open(testCtx(t), dir, Options{RelayOnly: true}); !errors.Is(err, ErrNoHost) {
		t.Fatalf("RelayOnly with no host: %v, want ErrNoHost", err)
	}
	d := hosttest.NewDialer()
	echoParams(d, "echo")
	hosting := open(t, dir, Options{NewHost: fakeHost(d, def("echo"))})
	relay := open(t, dir, Options{RelayOnly: true})
	ctx := testCtx(t)
	if got, err := relay.Call(ctx, "echo", "tools/call", []byte(`{"a":1}`), host.CallOptions{}); err != nil || string(got) != `{"a":1}` {
		t.Fatalf("relayed call: %s, %v", got, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := hosting.Close(cctx); err != nil {
		t.Fatal(err)
	}
	if _, err := relay.Call(ctx, "echo", "tools/call", nil, host.CallOptions{}); !errors.Is(err, ErrNoHost) {
		t.Errorf("RelayOnly after the host left: %v, want ErrNoHost", err)
	}
	if relay.Stats().Hosting {
		t.Error("a RelayOnly Node hosts")
	}
}

func TestLockHeldButNobodyAnswers(t *testing.T) {
	dir := testenv.PrivateDir(t)
	f, ok, err := tryLock(dir)
	if err != nil || !ok {
		t.Fatalf("taking the lock: %v %v", ok, err)
	}
	defer unlock(f)
	writePID(f)
	start := time.Now()
	_, err = Open(testCtx(t), dir, Options{NewHost: fakeHost(hosttest.NewDialer()), ElectTimeout: 300 * time.Millisecond})
	var ue *UnreachableError
	if !errors.As(err, &ue) || ue.HolderPID != os.Getpid() || !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Open while another holds the lock and serves nothing: %v", err)
	}
	t.Logf("%v (after %v)", err, time.Since(start).Round(time.Millisecond))
}

// TestHostOfAnotherRelease: a host that answers hello with another protocol version
// is refused at once, with a message saying what to do.
func TestHostOfAnotherRelease(t *testing.T) {
	dir := testenv.PrivateDir(t)
	f, _, err := tryLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock(f)
	ln, err := net.Listen("unix", filepath.Join(dir, sockName))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				if _, err := r.ReadString('\n'); err == nil {
					c.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"protocol":99,"pid":1,"max_message_bytes":1000,"max_in_flight":1}}` + "\n"))
				}
				r.ReadString('\n')
			}()
		}
	}()
	_, err = Open(testCtx(t), dir, Options{NewHost: fakeHost(hosttest.NewDialer())})
	var pe *ProtocolError
	if !errors.As(err, &pe) || pe.Theirs != 99 || pe.Ours != Protocol || !strings.Contains(err.Error(), "restart it") {
		t.Fatalf("Open against a host of another release: %v", err)
	}
}

func TestStaleSocketReplacedByTheHolder(t *testing.T) {
	dir := testenv.PrivateDir(t)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, sockName), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close() // a socket file nobody listens on, as a killed host leaves
	d := hosttest.NewDialer()
	echoParams(d, "echo")
	hosting := open(t, dir, Options{NewHost: fakeHost(d, def("echo"))})
	relay := open(t, dir, Options{NewHost: fakeHost(d, def("echo"))})
	if !hosting.Stats().Hosting || relay.Stats().Hosting {
		t.Fatal("want the first Node hosting and the second relaying")
	}
	if _, err := relay.Call(testCtx(t), "echo", "tools/call", nil, host.CallOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestUnsafeLockFileRefused(t *testing.T) {
	dir := testenv.PrivateDir(t)
	if err := os.WriteFile(filepath.Join(dir, lockName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(dir, lockName), 0o644)
	_, err := Open(testCtx(t), dir, Options{NewHost: fakeHost(hosttest.NewDialer())})
	if !errors.Is(err, datadir.ErrUnsafe) || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("Open with a lock file others can read: %v", err)
	}
	if _, err := Open(testCtx(t), filepath.Join(dir, "missing", "deeper"), Options{}); err == nil {
		t.Fatal("Open without NewHost nor RelayOnly succeeded")
	}
}

func TestRestartReloadEndSessionRelayed(t *testing.T) {
	d := hosttest.NewDialer()
	var reloads atomic.Int32
	var reloadHost atomic.Pointer[host.Host]
	reloadErr := errors.New("store: definitions unreadable")
	fail := atomic.Bool{}
	dir := testenv.PrivateDir(t)
	hosting := open(t, dir, Options{NewHost: fakeHost(d, def("s")), Reload: func(_ context.Context, h *host.Host) error {
		reloads.Add(1)
		reloadHost.Store(h)
		if fail.Load() {
			return reloadErr
		}
		return nil
	}})
	relay := open(t, dir, Options{NewHost: fakeHost(d, def("s"))})
	ctx := testCtx(t)
	if err := relay.Reload(ctx); err != nil || reloads.Load() != 1 || reloadHost.Load() != hosting.local.h {
		t.Fatalf("Reload through the relay: %v, %d runs", err, reloads.Load())
	}
	fail.Store(true)
	if err := relay.Reload(ctx); err == nil || err.Error() != reloadErr.Error() {
		t.Errorf("a failing reload: %v", err)
	}
	if _, err := relay.Call(ctx, "s", "tools/call", nil, host.CallOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := relay.Restart(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the restart to dial again", func() bool { return d.Dials("s") == 2 })
	if err := relay.Restart(ctx, "missing"); !errors.Is(err, host.ErrUnknownServer) {
		t.Errorf("restarting an unknown server: %v", err)
	}
	if err := relay.EndSession(ctx, ""); err != nil {
		t.Errorf("EndSession of no key: %v", err)
	}
}

func TestClosedNode(t *testing.T) {
	d := hosttest.NewDialer()
	hosting, relay, _ := pair(t, d, def("s"))
	ctx := testCtx(t)
	for _, n := range []*Node{relay, hosting} {
		if err := n.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := n.Close(ctx); err != nil {
			t.Errorf("a second Close: %v", err)
		}
		if _, err := n.Call(ctx, "s", "tools/call", nil, host.CallOptions{}); !errors.Is(err, ErrClosed) {
			t.Errorf("a call after Close: %v", err)
		}
	}
	if u := d.Unclosed(); len(u) != 0 {
		t.Errorf("%d upstream sessions left open by the closed host", len(u))
	}
}

func TestLocalAdapter(t *testing.T) {
	d := hosttest.NewDialer()
	echoParams(d, "echo")
	var reloaded atomic.Bool
	l, err := NewLocal(testCtx(t), fakeHost(d, def("echo")), func(context.Context, *host.Host) error {
		reloaded.Store(true)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var up Upstreams = l
	ctx := testCtx(t)
	r := newRecorder()
	stop := up.Watch(r)
	r.waitFor(t, "the first resync", func() bool { return r.resyncs == 1 })
	if got, err := up.Call(ctx, "echo", "tools/call", json.RawMessage(`{"x" : 1.50}`), host.CallOptions{}); err != nil || string(got) != `{"x" : 1.50}` {
		t.Fatalf("call: %s %v", got, err)
	}
	r.waitFor(t, "the start's events", func() bool { return len(r.events) >= 2 })
	r.checkConsecutive(t, "local")
	stop()
	if err := up.Reload(ctx); err != nil || !reloaded.Load() {
		t.Errorf("Reload: %v, ran %v", err, reloaded.Load())
	}
	if err := up.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(d.Unclosed()) != 0 {
		t.Error("Close left an upstream session open")
	}
}

// TestWatchOverflowBecomesResync: a watcher that falls behind by more than its queue
// gets a Resync instead of the events it missed, then only newer events.
func TestWatchOverflowBecomesResync(t *testing.T) {
	release := make(chan struct{})
	w := &blockingWatcher{recorder: newRecorder(), release: release}
	var fetches atomic.Int32
	q := newWatchq(w, 8, func(context.Context) (host.Snapshot, error) {
		if fetches.Add(1) == 1 {
			return host.Snapshot{Version: 0}, nil
		}
		return host.Snapshot{Version: 100}, nil
	})
	defer q.stop()
	q.resync(nil)
	w.waitFor(t, "the first resync", func() bool { return w.resyncs == 1 })
	// The watcher blocks in the first event; the rest overflow its queue of 8.
	for i := range 50 {
		q.event(host.ServerEvent{Seq: uint64(i + 1), Server: "s"})
	}
	close(release)
	w.waitFor(t, "a resync after the overflow", func() bool { return w.resyncs == 2 })
	q.event(host.ServerEvent{Seq: 100, Server: "old"}) // not newer than the snapshot
	q.event(host.ServerEvent{Seq: 101, Server: "new"})
	w.waitFor(t, "the next event", func() bool { return len(w.events) > 0 })
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.events) != 1 || w.events[0].(host.ServerEvent).Server != "new" {
		t.Errorf("after the resync to 100: %+v, want only seq 101", w.events)
	}
	if q.dropped.Load() == 0 {
		t.Error("no events counted as dropped")
	}
}

// blockingWatcher blocks in its first event until release closes.
type blockingWatcher struct {
	*recorder
	release chan struct{}
	blocked atomic.Bool
}

func (b *blockingWatcher) ServerChanged(e host.ServerEvent) {
	if b.blocked.CompareAndSwap(false, true) {
		<-b.release
	}
	b.recorder.ServerChanged(e)
}

// TestLockOutlivesASlowShutdown: when Close's context ends before the host stopped its
// upstreams, the lock stays held until they are stopped, so the next host cannot run a
// second copy meanwhile.
func TestLockOutlivesASlowShutdown(t *testing.T) {
	d := hosttest.NewDialer()
	d.Server("s").Set(func(b *hosttest.Behavior) { b.CloseHang = true })
	newHost := func(_ context.Context, obs host.Observer) (*host.Host, error) {
		return host.New(host.Options{Dialer: d, Observer: obs, Servers: []host.Definition{def("s")},
			IdleTimeout: -1, Health: host.HealthPolicy{Interval: -1}, StopTimeout: 500 * time.Millisecond})
	}
	dir := testenv.PrivateDir(t)
	first, err := Open(testCtx(t), dir, Options{NewHost: newHost})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if _, err := first.Call(ctx, "s", "tools/call", nil, host.CallOptions{}); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	var se *host.ShutdownError
	if err := first.Close(short); !errors.As(err, &se) {
		t.Fatalf("Close with a hung upstream: %v, want a *host.ShutdownError", err)
	}
	if free, _ := lockFree(dir); free {
		t.Fatal("the lock was released while an upstream was still stopping")
	}
	second := open(t, dir, Options{NewHost: newHost})
	if !second.Stats().Hosting {
		t.Fatal("the second Node does not host once the first let go")
	}
	if _, err := second.Call(ctx, "s", "tools/call", nil, host.CallOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := d.MaxOpen("s"); got != 1 {
		t.Errorf("%d sessions of server s were open at once, want 1", got)
	}
}

// TestWatchDeliversEachEventOnce: a source that hands an event over twice (two
// subscriptions overlapping for a moment) still delivers it once.
func TestWatchDeliversEachEventOnce(t *testing.T) {
	r := newRecorder()
	q := newWatchq(r, 16, func(context.Context) (host.Snapshot, error) { return host.Snapshot{Version: 3}, nil })
	defer q.stop()
	q.resync(nil)
	r.waitFor(t, "the resync", func() bool { return r.resyncs == 1 })
	for _, seq := range []uint64{2, 3, 4, 4, 5, 5, 6} {
		q.event(host.ServerEvent{Seq: seq, Server: "s"})
	}
	r.waitFor(t, "events 4..6", func() bool { return len(r.events) == 3 })
	q.event(host.ServerEvent{Seq: 7, Server: "s"})
	r.waitFor(t, "event 7", func() bool { return len(r.events) == 4 })
	r.checkConsecutive(t, "deduplicated")
}
