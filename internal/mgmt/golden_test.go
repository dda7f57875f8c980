package mgmt_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/tools/txtar"

	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/mgmt/mgmttest"
)

var update = flag.Bool("update", false, "rewrite the expected answers of testdata/golden/*.txtar")

// Test tokens: the owner's, an admin principal's (one holding an allow grant on
// toolgate.admin), and a principal's without that grant.
const (
	ownerToken  = "owner-token"
	adminToken  = "ops-token"
	readerToken = "reader-token"
)

func testAuth(_ context.Context, token string) (mgmt.Caller, bool, bool) {
	switch token {
	case ownerToken:
		return mgmt.Caller{Principal: "default", Owner: true}, true, true
	case adminToken:
		return mgmt.Caller{Principal: "ops"}, true, true
	case readerToken:
		return mgmt.Caller{Principal: "reader"}, false, true
	}
	return mgmt.Caller{}, false, false
}

// goldenHeaders are the response headers the golden files pin.
var goldenHeaders = []string{"Allow", "Cache-Control", "Content-Type", "Www-Authenticate"}

// goldenCase is a golden file's directives (lines "key: value" in its comment):
// fake: seeded (default; the documented example state) or empty; max-body: N.
type goldenCase struct {
	seeded  bool
	maxBody int64
}

func directives(t *testing.T, comment string) goldenCase {
	gc := goldenCase{seeded: true}
	for _, line := range strings.Split(comment, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "fake":
			gc.seeded = v != "empty"
		case "max-body":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("max-body: %v", err)
			}
			gc.maxBody = n
		}
	}
	return gc
}

// serveStack is the handler as toolgate serve mounts it: on a mux, behind serve's
// Host/Origin guard.
func serveStack(t testing.TB, m mgmt.Manager, opts mgmt.Options) (http.Handler, *mgmt.Handler) {
	t.Helper()
	opts.Manager = m
	if opts.Authenticate == nil {
		opts.Authenticate = testAuth
	}
	h, err := mgmt.NewHandler(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	mux := http.NewServeMux()
	mux.Handle(mgmt.Path, h)
	return mcpserver.Guard(mux, nil), h
}

// A golden file is a prose comment with directives, then alternating "request" and
// "response" files (one fake serves them in order, so a file can show a change and
// the list after it). A request is raw HTTP; a response is "HTTP <status>", the pinned
// headers, a blank line and the body, byte for byte. A file may instead hold "send"
// and "receive" files: WebSocket messages, one per line, sent on one socket and then
// expected in order; "publish" files hold notifications the fake publishes.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/golden/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			gc := directives(t, string(ar.Comment))
			fake := mgmttest.New()
			if gc.seeded {
				fake = mgmttest.NewSeeded()
			}
			stack, _ := serveStack(t, fake, mgmt.Options{MaxBodyBytes: gc.maxBody})
			var srv *httptest.Server
			var sock *websocket.Conn
			changed := false
			for i := range ar.Files {
				f := &ar.Files[i]
				switch f.Name {
				case "request":
					if i+1 >= len(ar.Files) || ar.Files[i+1].Name != "response" {
						t.Fatalf("request %d has no response after it", i)
					}
					got := roundTrip(t, stack, string(f.Data))
					want := &ar.Files[i+1]
					if got != string(want.Data) {
						if *update {
							want.Data = []byte(got)
							changed = true
							continue
						}
						t.Errorf("request %d:\n%s\ngot:\n%s\nwant:\n%s", i/2, f.Data, got, want.Data)
					}
				case "send":
					if sock == nil {
						srv = httptest.NewServer(stack)
						defer srv.Close()
						sock = dialSocket(t, srv.URL, ownerToken)
						defer sock.CloseNow()
					}
					for _, line := range strings.Split(strings.TrimRight(string(f.Data), "\n"), "\n") {
						writeMsg(t, sock, line)
					}
				case "publish":
					// Notifications the fake's methods do not make (catalogue changes),
					// published as the Manager would, one JSON-RPC notification a line.
					for _, line := range strings.Split(strings.TrimRight(string(f.Data), "\n"), "\n") {
						n, ok := mgmt.DecodeNotification([]byte(line))
						if !ok {
							t.Fatalf("not a notification: %s", line)
						}
						fake.Publish(n)
					}
				case "receive":
					want := strings.Split(strings.TrimRight(string(f.Data), "\n"), "\n")
					var got []string
					for range want {
						got = append(got, readMsg(t, sock))
					}
					if g := strings.Join(got, "\n") + "\n"; g != string(f.Data) {
						if *update {
							f.Data = []byte(g)
							changed = true
							continue
						}
						t.Errorf("socket messages:\ngot:\n%s\nwant:\n%s", g, f.Data)
					}
				case "response":
				default:
					t.Fatalf("unknown file %q", f.Name)
				}
			}
			if changed {
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// roundTrip serves one raw HTTP request and renders the answer as the golden files do.
func roundTrip(t *testing.T, h http.Handler, raw string) string {
	t.Helper()
	head, body, _ := strings.Cut(raw, "\n\n")
	body = strings.TrimSuffix(body, "\n")
	lines := strings.Split(head, "\n")
	parts := strings.Fields(lines[0])
	if len(parts) < 2 {
		t.Fatalf("bad request line %q", lines[0])
	}
	req := httptest.NewRequest(parts[0], parts[1], strings.NewReader(body))
	for _, l := range lines[1:] {
		k, v, _ := strings.Cut(l, ":")
		v = strings.TrimSpace(v)
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Add(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d\n", rec.Code)
	for _, k := range goldenHeaders {
		for _, v := range rec.Header().Values(k) {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	b.WriteString("\n")
	if s := rec.Body.String(); s != "" {
		b.WriteString(strings.TrimSuffix(s, "\n") + "\n")
	}
	return b.String()
}

func dialSocket(t testing.TB, base, token string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+mgmt.Path, &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + token}},
	})
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dialing the socket: %v (HTTP %d)", err, status)
	}
	c.SetReadLimit(mgmt.MaxAnswerBytes)
	return c
}

func writeMsg(t testing.TB, c *websocket.Conn, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		t.Fatalf("writing to the socket: %v", err)
	}
}

func readMsg(t testing.TB, c *websocket.Conn) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("reading from the socket: %v", err)
	}
	return string(b)
}

// TestGoldenCoversEveryMethod keeps one golden file per method, each exercising it.
func TestGoldenCoversEveryMethod(t *testing.T) {
	for file, method := range map[string]string{
		"list": mgmt.MethodList, "install": mgmt.MethodInstall, "policy_set": mgmt.MethodPolicySet,
		"restart": mgmt.MethodRestart, "uninstall": mgmt.MethodUninstall, "details": mgmt.MethodDetails,
	} {
		ar, err := txtar.ParseFile(filepath.Join("testdata/golden", file+".txtar"))
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		if !slices.ContainsFunc(ar.Files, func(f txtar.File) bool {
			return f.Name == "request" && strings.Contains(string(f.Data), `"method":"`+method+`"`)
		}) {
			t.Errorf("%s.txtar has no %s request", file, method)
		}
	}
}
