package upstreamauth_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/keystore"
	"github.com/toolgate/toolgate/internal/keystore/keystoretest"
	"github.com/toolgate/toolgate/internal/netguard"
	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstreamauth"
	"github.com/toolgate/toolgate/internal/upstreamauth/upstreamauthtest"
)

// canary is in every token, code and secret the fixture issues.
const canary = "CANARYq7Zx"

// world is one server's authorization under test: the fixture, the Server,
// the keystore it stores into, and everything it logged.
type world struct {
	fx     *upstreamauthtest.Fixture
	s      *upstreamauth.Server
	ks     *keystore.Keystore
	mem    *keystoretest.Mem
	store  *upstreamauth.KeystoreStore
	guard  *netguard.Guard
	logs   *lockedBuffer
	seenMu sync.Mutex
	seen   []string // every error and answer a test saw, checked for the canary
}

// saw keeps a text to check for secrets.
func (w *world) saw(text string) {
	w.seenMu.Lock()
	defer w.seenMu.Unlock()
	w.seen = append(w.seen, text)
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// transport is a guarded transport without keep-alives: a connection idle in
// a pool would hold a synctest bubble's clock still.
func transport(g *netguard.Guard) *http.Transport {
	t := netguard.NewTransport(g)
	t.DisableKeepAlives = true
	return t
}

func newWorld(t testing.TB, opts upstreamauthtest.Options, cfg upstreamauth.Config) *world {
	t.Helper()
	opts.Canary = canary
	w := &world{fx: upstreamauthtest.New(t, opts), logs: &lockedBuffer{}}
	w.ks, w.mem = keystoretest.New(t)
	w.store = upstreamauth.NewKeystoreStore(w.ks, "user")
	w.guard = netguard.NewGuard(netguard.Policy{}, nil)
	w.s = w.server(t, cfg)
	return w
}

// server returns a Server for the world's fixture (a fresh one: as after a
// restart, it knows only what is stored).
func (w *world) server(t testing.TB, cfg upstreamauth.Config) *upstreamauth.Server {
	t.Helper()
	if cfg.Server == "" {
		cfg.Server = "files"
	}
	cfg.URL = w.fx.URL
	cfg.Store = w.store
	cfg.Guard = w.guard
	cfg.Transport = transport(w.guard)
	cfg.Logger = slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := upstreamauth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// dial connects to the fixture's MCP server with s as the Authorizer.
func (w *world) dial(ctx context.Context, s *upstreamauth.Server) (*upstream.Conn, error) {
	c, err := upstream.DialHTTP(ctx, upstream.HTTPSpec{URL: w.fx.URL, Auth: s, Transport: transport(w.guard)},
		upstream.Options{Era: upstream.EraStateless})
	if err != nil {
		w.saw(err.Error())
	}
	return c, err
}

// connect dials s and fails the test when it cannot; the connection closes
// when the test ends.
func (w *world) connect(t *testing.T, ctx context.Context, s *upstreamauth.Server) *upstream.Conn {
	t.Helper()
	c, err := w.dial(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// call makes one tools/call of the echo tool.
func (w *world) call(ctx context.Context, c *upstream.Conn) error {
	res, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"echo","arguments":{"n":1}}`))
	if err != nil {
		w.saw(err.Error())
		return err
	}
	w.saw(string(res)) // an answer is checked for secrets too
	if !strings.Contains(string(res), `echo {\"n\":1}`) {
		return errors.New("unexpected result " + string(res))
	}
	return nil
}

// noCanary fails when any log line, error or status a test saw holds a
// token, code or secret the fixture issued.
func (w *world) noCanary(t *testing.T, extra ...string) {
	t.Helper()
	st, _ := w.s.Status(context.Background())
	status, _ := json.Marshal(st)
	w.seenMu.Lock()
	texts := append(append([]string{w.logs.String(), string(status)}, w.seen...), extra...)
	w.seenMu.Unlock()
	for _, text := range texts {
		if strings.Contains(text, canary) {
			t.Errorf("a secret leaked: %s", text)
		}
	}
	noCanaryInProcesses(t)
}

// noCanaryInProcesses: no process's argv holds a token (nothing toolgate
// starts, a browser included, is given one).
func noCanaryInProcesses(t *testing.T) {
	t.Helper()
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(canary)) {
			t.Errorf("%s holds a secret: %q", p, b)
		}
	}
	if len(dirs) == 0 {
		t.Errorf("no /proc to scan")
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// tokenRequests counts the fixture's token requests of grant type gt ("" all).
func tokenRequests(fx *upstreamauthtest.Fixture, gt string) int {
	n := 0
	for _, r := range fx.TokenRequests() {
		if gt == "" || r.GrantType == gt {
			n++
		}
	}
	return n
}

// everyTokenRequestNamesTheServer: RFC 8707 on every token request.
func everyTokenRequestNamesTheServer(t *testing.T, fx *upstreamauthtest.Fixture) {
	t.Helper()
	for i, r := range fx.TokenRequests() {
		if len(r.Resource) != 1 || r.Resource[0] != fx.URL {
			t.Errorf("token request %d (%s) resource %v, want %s", i, r.GrantType, r.Resource, fx.URL)
		}
	}
}

// browse is a person's browser: it opens u and follows redirects.
func browse(u string) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New("the browser ended on HTTP " + resp.Status)
	}
	return nil
}
