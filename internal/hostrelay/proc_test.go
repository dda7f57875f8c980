package hostrelay

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/host/hosttest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// The test binary doubles as a toolgate-like process on a data directory: with
// helperDir set it opens a Node there and obeys commands on stdin, one JSON object a
// line, answering on stdout (helper below). helperUpstream says what it hosts when it
// wins: "fixture:PATH:MARKER" (the upstream fixture as server "fx") or "fake".
// helperDial makes it only dial that socket path and report how it went.
const (
	helperDir      = "HOSTRELAY_TEST_DIR"
	helperUpstream = "HOSTRELAY_TEST_UPSTREAM"
	helperDial     = "HOSTRELAY_TEST_DIAL"
	helperRawDial  = "HOSTRELAY_TEST_RAWDIAL"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(helperDial); path != "" {
		os.Exit(runDial(path))
	}
	if path := os.Getenv(helperRawDial); path != "" {
		os.Exit(runRawDial(path))
	}
	if dir := os.Getenv(helperDir); dir != "" {
		os.Exit(runHelper(dir))
	}
	os.Exit(m.Run())
}

// runDial connects to path as a relay client and prints what happened.
func runDial(path string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dialClient(ctx, path, Limits{}.withDefaults(), nil, nil)
	if err != nil {
		fmt.Println("refused:", err)
		return 0
	}
	defer c.close()
	if _, err := c.Snapshot(ctx); err != nil {
		fmt.Println("refused:", err)
		return 0
	}
	fmt.Println("served")
	return 0
}

// runRawDial connects to path without checking the host and sends hello: it prints
// "answered" or "closed", what the host did.
func runRawDial(path string) int {
	nc, err := net.Dial("unix", path)
	if err != nil {
		fmt.Println("dial:", err)
		return 0
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(nc, `{"jsonrpc":"2.0","id":1,"method":"hello","params":{"protocol":%d,"pid":%d,"max_message_bytes":1000000}}`+"\n", Protocol, os.Getpid())
	if _, err := bufio.NewReader(nc).ReadString('\n'); err != nil {
		fmt.Println("closed:", err)
		return 0
	}
	fmt.Println("answered")
	return 0
}

type command struct {
	ID       int             `json:"id"`
	Op       string          `json:"op"` // call, cancel, stats, status, watch, catalog, close
	Server   string          `json:"server,omitempty"`
	Tool     string          `json:"tool,omitempty"`
	Args     json.RawMessage `json:"args,omitempty"`
	Meta     json.RawMessage `json:"meta,omitempty"`
	Progress bool            `json:"progress,omitempty"`
	Key      string          `json:"key,omitempty"`
	Target   int             `json:"target,omitempty"`
}

type reply struct {
	ID       int      `json:"id,omitempty"`
	Ready    bool     `json:"ready,omitempty"`
	Result   []byte   `json:"result,omitempty"`
	Err      string   `json:"err,omitempty"`
	Kind     string   `json:"kind,omitempty"` // host_gone, host_gone_unsent, canceled, server:<kind>, rpc, other
	Progress [][]byte `json:"progress,omitempty"`
	Items    [][]byte `json:"items,omitempty"`
	Stats    *Stats   `json:"stats,omitempty"`
	InFlight int      `json:"in_flight,omitempty"`
	PID      int      `json:"pid,omitempty"`
	// Unsolicited lines: an event or resync the watcher got, a request the fixture made.
	Event string `json:"event,omitempty"`
	Asked string `json:"asked,omitempty"`
}

type lineWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (l *lineWriter) put(r reply) {
	b, _ := json.Marshal(r)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w.Write(append(b, '\n'))
	l.w.Flush()
}

func errKind(err error) string {
	var hg *HostGoneError
	var se *host.ServerError
	switch {
	case errors.As(err, &hg) && hg.Sent:
		return "host_gone"
	case errors.As(err, &hg):
		return "host_gone_unsent"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &se):
		return "server:" + se.Kind.Error()
	}
	return "other"
}

// helperWatcher prints what it gets.
type helperWatcher struct{ out *lineWriter }

func (w helperWatcher) ServerChanged(e host.ServerEvent) {
	w.out.put(reply{Event: fmt.Sprintf("server %s %s", e.Server, e.Change)})
}
func (w helperWatcher) StateChanged(e host.StateEvent) {
	w.out.put(reply{Event: fmt.Sprintf("state %s %s", e.Server, e.To)})
}
func (w helperWatcher) CatalogChanged(e host.CatalogEvent) {
	w.out.put(reply{Event: fmt.Sprintf("catalog %s %d", e.Server, e.Version)})
}
func (w helperWatcher) Resync(s host.Snapshot) { w.out.put(reply{Event: "resync"}) }

func runHelper(dir string) int {
	out := &lineWriter{w: bufio.NewWriter(os.Stdout)}
	var newHost NewHostFunc
	switch up := os.Getenv(helperUpstream); {
	case strings.HasPrefix(up, "fixture:"):
		fixture, marker, _ := strings.Cut(strings.TrimPrefix(up, "fixture:"), ":")
		newHost = fixtureHost(fixture, marker, func(ctx context.Context, method string, _ json.RawMessage) (json.RawMessage, error) {
			out.put(reply{Asked: method})
			<-ctx.Done() // the fixture's "ask" waits for ever: its tools/call is in flight
			return nil, ctx.Err()
		})
	default:
		d := hosttest.NewDialer()
		echoParams(d, "fx")
		newHost = fakeHost(d, def("fx"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	n, err := Open(ctx, dir, Options{NewHost: newHost})
	cancel()
	if err != nil {
		out.put(reply{Err: err.Error()})
		return 1
	}
	out.put(reply{Ready: true, PID: os.Getpid(), Stats: ptr(n.Stats())})

	var mu sync.Mutex
	calls := map[int]context.CancelFunc{}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 64<<20)
	for in.Scan() {
		var c command
		if err := json.Unmarshal(in.Bytes(), &c); err != nil {
			out.put(reply{Err: "bad command: " + err.Error()})
			continue
		}
		switch c.Op {
		case "call":
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			mu.Lock()
			calls[c.ID] = cancel
			mu.Unlock()
			go func() {
				defer cancel()
				params := toolParams(c)
				var progMu sync.Mutex
				var progress [][]byte
				opts := host.CallOptions{SessionKey: c.Key}
				if c.Progress {
					opts.Progress = func(p json.RawMessage) {
						progMu.Lock()
						progress = append(progress, append([]byte(nil), p...))
						progMu.Unlock()
					}
				}
				server := c.Server
				if server == "" {
					server = "fx"
				}
				res, err := n.Call(ctx, server, "tools/call", params, opts)
				r := reply{ID: c.ID, Result: res}
				if err != nil {
					r.Err, r.Kind = err.Error(), errKind(err)
				}
				progMu.Lock()
				r.Progress = progress
				progMu.Unlock()
				out.put(r)
			}()
		case "cancel":
			mu.Lock()
			if cancel := calls[c.Target]; cancel != nil {
				cancel()
			}
			mu.Unlock()
			out.put(reply{ID: c.ID})
		case "stats":
			out.put(reply{ID: c.ID, Stats: ptr(n.Stats()), PID: os.Getpid()})
		case "status":
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			st, _, err := n.Status(ctx, "fx")
			cancel()
			r := reply{ID: c.ID, InFlight: st.InFlight}
			if err != nil {
				r.Err, r.Kind = err.Error(), errKind(err)
			}
			out.put(r)
		case "watch":
			n.Watch(helperWatcher{out})
			out.put(reply{ID: c.ID})
		case "catalog":
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			cat, err := n.RefreshCatalog(ctx, "fx")
			cancel()
			r := reply{ID: c.ID}
			if err != nil {
				r.Err, r.Kind = err.Error(), errKind(err)
			}
			for _, it := range cat.Tools {
				r.Items = append(r.Items, it)
			}
			out.put(r)
		case "close":
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			err := n.Close(ctx)
			cancel()
			r := reply{ID: c.ID}
			if err != nil {
				r.Err = err.Error()
			}
			out.put(r)
			return 0
		default:
			out.put(reply{ID: c.ID, Err: "unknown op " + c.Op})
		}
	}
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n.Close(ctx)
	return 0
}

func ptr[T any](v T) *T { return &v }

// toolParams builds tools/call params: {"name":…,"arguments":…,"_meta":…}, the raw
// parts spliced in as they are.
func toolParams(c command) json.RawMessage {
	b := []byte(`{"name":`)
	name, _ := json.Marshal(c.Tool)
	b = append(b, name...)
	if c.Args != nil {
		b = append(append(b, `,"arguments":`...), c.Args...)
	}
	if c.Meta != nil {
		b = append(append(b, `,"_meta":`...), c.Meta...)
	}
	return append(b, '}')
}

// proc is a helper process driven by a test.
type proc struct {
	t      testing.TB
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *testenv.SyncBuffer
	ready  reply

	mu      sync.Mutex
	nextID  int
	waiting map[int]chan reply
	events  []string
	asked   []string
	notify  chan struct{}
	exited  chan struct{}
}

// startProc starts a helper on dir hosting upstream ("fixture:…" or "fake") when it
// wins the election, and waits until its Node is open.
func startProc(t testing.TB, dir, upstream string) *proc {
	t.Helper()
	p := launch(t, dir, upstream, nil, "")
	return p.waitReady()
}

// waitReady waits until the helper's Node is open.
func (p *proc) waitReady() *proc {
	t := p.t
	t.Helper()
	select {
	case <-p.readyCh():
	case <-p.exited:
		t.Fatalf("helper exited before it was ready: %s", p.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("helper not ready: %s", p.stderr.String())
	}
	if p.ready.Err != "" {
		t.Fatalf("helper could not open the data directory: %s", p.ready.Err)
	}
	return p
}

func (p *proc) readyCh() <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for {
			p.mu.Lock()
			ok := p.ready.Ready || p.ready.Err != ""
			p.mu.Unlock()
			if ok {
				close(ch)
				return
			}
			select {
			case <-p.notify:
			case <-p.exited:
				return
			}
		}
	}()
	return ch
}

// launch starts a helper; bin "" is this test binary, cred nil this user.
func launch(t testing.TB, dir, upstream string, cred *syscall.Credential, bin string) *proc {
	t.Helper()
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), helperDir+"="+dir, helperUpstream+"="+upstream)
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	p := &proc{t: t, cmd: cmd, stderr: &testenv.SyncBuffer{}, waiting: map[int]chan reply{},
		notify: make(chan struct{}, 1), exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go p.read(stdout)
	t.Cleanup(func() {
		p.stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(20 * time.Second):
			t.Errorf("helper %d did not exit at stdin EOF; killing it", cmd.Process.Pid)
			cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

func (p *proc) read(stdout io.Reader) {
	defer func() {
		p.cmd.Wait()
		close(p.exited)
	}()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var r reply
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			continue
		}
		p.mu.Lock()
		switch {
		case r.Ready || (r.ID == 0 && r.Err != ""):
			p.ready = r
		case r.Event != "":
			p.events = append(p.events, r.Event)
		case r.Asked != "":
			p.asked = append(p.asked, r.Asked)
		default:
			if ch := p.waiting[r.ID]; ch != nil {
				ch <- r
				delete(p.waiting, r.ID)
			}
		}
		p.mu.Unlock()
		select {
		case p.notify <- struct{}{}:
		default:
		}
	}
}

// start sends c and returns a channel for its reply.
func (p *proc) start(c command) (int, <-chan reply) {
	p.t.Helper()
	ch := make(chan reply, 1)
	p.mu.Lock()
	p.nextID++
	c.ID = p.nextID
	p.waiting[c.ID] = ch
	p.mu.Unlock()
	b, _ := json.Marshal(c)
	if _, err := p.stdin.Write(append(b, '\n')); err != nil {
		p.t.Fatalf("helper %d: %v", p.cmd.Process.Pid, err)
	}
	return c.ID, ch
}

func (p *proc) await(ch <-chan reply) reply {
	p.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-p.exited:
		p.t.Fatalf("helper %d exited: %s", p.cmd.Process.Pid, p.stderr.String())
	case <-time.After(40 * time.Second):
		p.t.Fatalf("helper %d did not answer: %s", p.cmd.Process.Pid, p.stderr.String())
	}
	return reply{}
}

func (p *proc) do(c command) reply {
	p.t.Helper()
	_, ch := p.start(c)
	return p.await(ch)
}

// inFlight is the number of calls under way on server fx, as the host reports it.
func (p *proc) inFlight() int {
	p.t.Helper()
	return p.do(command{Op: "status"}).InFlight
}

func (p *proc) stats() Stats {
	p.t.Helper()
	return *p.do(command{Op: "stats"}).Stats
}

// waitEvent waits until the helper printed n events starting with prefix.
func (p *proc) waitEvent(prefix string, n int) {
	p.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		p.mu.Lock()
		seen := 0
		for _, e := range p.events {
			if strings.HasPrefix(e, prefix) {
				seen++
			}
		}
		p.mu.Unlock()
		if seen >= n {
			return
		}
		select {
		case <-p.notify:
		case <-deadline:
			p.mu.Lock()
			defer p.mu.Unlock()
			p.t.Fatalf("helper %d: fewer than %d events %q among %q", p.cmd.Process.Pid, n, prefix, p.events)
		}
	}
}

func (p *proc) waitAsked() {
	p.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		p.mu.Lock()
		n := len(p.asked)
		p.mu.Unlock()
		if n > 0 {
			return
		}
		select {
		case <-p.notify:
		case <-deadline:
			p.t.Fatalf("helper %d: the fixture never asked", p.cmd.Process.Pid)
		}
	}
}

func (p *proc) kill() {
	p.t.Helper()
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}
