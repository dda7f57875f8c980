package mcpserver_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mcpserver/mcpservertest"
	"github.com/toolgate/toolgate/internal/mcpspec"
)

var update = flag.Bool("update", false, "rewrite the expected responses of testdata/wire/*.txtar")

// wireHeaders are the response headers the golden files pin.
var wireHeaders = []string{"Allow", "Cache-Control", "Content-Type", "Mcp-Session-Id", "Retry-After", "Www-Authenticate"}

// A wire file is a prose comment, then directives (lines "key: value" in the
// comment: server: bridge|handler; auth: TOKEN[=PRINCIPAL],...; max-body: N;
// stateless: false turns the 2026-07-28 revision off, which is on by default;
// max-sessions: N and max-sessions-per-principal: N for the handler;
// no-tools: PRINCIPAL,... for principals whose handler Turns publish no tool;
// open-fails: PRINCIPAL,... for principals whose handler Turns cannot be opened),
// then alternating "request" and "response" files. A request is raw HTTP; in it
// {{session}} is the session id the server issued and {{foreign}} an id no server
// issued. A response is "HTTP <status>", the pinned headers, a blank line and the
// body; the session id is written as {{session}}, and the ids of sessions a
// handler opens after it as {{session2}}, {{session3}}, … in the order issued
// (requests may name them the same way).
type wireCase struct {
	server    string
	stateless bool
	tokens    map[string]string
	maxBody   int64
	// maxSessions and maxPerPrincipal are the handler's session limits.
	maxSessions, maxPerPrincipal int
	// noTools are principals that can see no tool.
	noTools map[string]bool
	// openFails are principals whose Turns cannot be opened.
	openFails map[string]bool
}

func parseDirectives(t *testing.T, comment string) wireCase {
	wc := wireCase{server: "bridge", stateless: true}
	for _, line := range strings.Split(comment, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "server":
			wc.server = v
		case "auth":
			wc.tokens = map[string]string{}
			for _, tok := range strings.Split(v, ",") {
				tk, principal, _ := strings.Cut(strings.TrimSpace(tok), "=")
				wc.tokens[tk] = principal
			}
		case "stateless":
			wc.stateless = v != "false"
		case "no-tools", "open-fails":
			set := map[string]bool{}
			for _, p := range strings.Split(v, ",") {
				set[strings.TrimSpace(p)] = true
			}
			if strings.TrimSpace(k) == "no-tools" {
				wc.noTools = set
			} else {
				wc.openFails = set
			}
		case "max-body":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("max-body: %v", err)
			}
			wc.maxBody = n
		case "max-sessions", "max-sessions-per-principal":
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			if strings.TrimSpace(k) == "max-sessions" {
				wc.maxSessions = n
			} else {
				wc.maxPerPrincipal = n
			}
		}
	}
	return wc
}

// wireServer is the server under test plus the session id to substitute.
type wireServer struct {
	h       http.Handler
	session string
	later   []string // {{session2}}, {{session3}}, …
	close   func()
}

func newWireServer(t *testing.T, wc wireCase) *wireServer {
	t.Helper()
	info := mcpspec.Implementation{Name: "toolgate", Version: "test"}
	switch wc.server {
	case "bridge":
		opts := mcpserver.BridgeOptions{ServerInfo: info, Instructions: "Test instructions.", MaxBodyBytes: wc.maxBody, NoStateless: !wc.stateless}
		if wc.tokens != nil {
			var toks []string
			for k := range wc.tokens {
				toks = append(toks, k)
			}
			opts.Authorize = func(token string, present bool) bool {
				for _, k := range toks {
					if mcpserver.StaticToken(k)(token, present) {
						return true
					}
				}
				return false
			}
		}
		b, err := mcpserver.NewBridge(mcpservertest.NewTurn(), opts)
		if err != nil {
			t.Fatal(err)
		}
		return &wireServer{h: b, session: b.SessionID(), close: func() { _ = b.Close() }}
	case "handler":
		opts := mcpserver.HandlerOptions{
			ServerInfo: info, Instructions: "Test instructions.", MaxBodyBytes: wc.maxBody, NoStateless: !wc.stateless,
			MaxSessions: wc.maxSessions, MaxSessionsPerPrincipal: wc.maxPerPrincipal,
			OpenTurn: func(ctx context.Context, principal string) (mcpserver.Turn, error) {
				if wc.openFails[principal] {
					return nil, fmt.Errorf("resolving the catalogue of %s: a secret cause", principal)
				}
				t := mcpservertest.NewTurn()
				t.Empty = wc.noTools[principal]
				return t, nil
			},
		}
		if wc.tokens != nil {
			opts.Authenticate = func(token string, present bool) (string, bool) {
				for k, p := range wc.tokens {
					if mcpserver.StaticToken(k)(token, present) {
						return p, true
					}
				}
				return "", false
			}
		}
		h := mcpserver.NewHandler(opts)
		return &wireServer{h: h, close: func() { _ = h.Close() }}
	}
	t.Fatalf("unknown server %q", wc.server)
	return nil
}

const foreignSession = "0123456789abcdef0123456789abcdef"

func (s *wireServer) do(t *testing.T, raw string) string {
	t.Helper()
	raw = strings.ReplaceAll(raw, "{{session}}", s.session)
	for i, id := range s.later {
		raw = strings.ReplaceAll(raw, fmt.Sprintf("{{session%d}}", i+2), id)
	}
	raw = strings.ReplaceAll(raw, "{{foreign}}", foreignSession)
	head, body, _ := strings.Cut(raw, "\n\n")
	body = strings.TrimSuffix(body, "\n")
	body = expandBody(body)
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head + "\n\n")))
	if err != nil {
		t.Fatalf("parsing request: %v\n%s", err, head)
	}
	req.Body = http.NoBody
	if body != "" {
		req.Body = httpBody(body)
		req.ContentLength = int64(len(body))
	}
	req.RequestURI = ""
	rec := httptest.NewRecorder()
	if req.Method == http.MethodGet {
		// A GET stream lasts until the client goes away: this one leaves once
		// its headers arrived, so the file pins them.
		ctx, cancel := context.WithCancel(context.Background())
		req = req.WithContext(ctx)
		s.h.ServeHTTP(&leavingRecorder{rec, cancel}, req)
		cancel()
	} else {
		s.h.ServeHTTP(rec, req)
	}
	res := rec.Result()
	sid := res.Header.Get("Mcp-Session-Id")
	if sid != "" && s.session == "" {
		s.session = sid
	} else if sid != "" && sid != s.session && !slices.Contains(s.later, sid) {
		s.later = append(s.later, sid)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "HTTP %d\n", res.StatusCode)
	for _, h := range wireHeaders {
		if v := res.Header.Get(h); v != "" {
			if h == "Mcp-Session-Id" && v == s.session {
				v = "{{session}}"
			} else if i := slices.Index(s.later, v); h == "Mcp-Session-Id" && i >= 0 {
				v = fmt.Sprintf("{{session%d}}", i+2)
			}
			fmt.Fprintf(&sb, "%s: %s\n", h, v)
		}
	}
	sb.WriteString("\n")
	sb.WriteString(rec.Body.String())
	out := sb.String()
	if !strings.HasSuffix(out, "\n") {
		out += "\n"
	}
	return out
}

// expandBody lets a file describe a large body: "{{repeat N X}}" becomes X
// repeated N times.
func expandBody(body string) string {
	for {
		i := strings.Index(body, "{{repeat ")
		if i < 0 {
			return body
		}
		j := strings.Index(body[i:], "}}")
		parts := strings.SplitN(body[i+len("{{repeat "):i+j], " ", 2)
		n, _ := strconv.Atoi(parts[0])
		body = body[:i] + strings.Repeat(parts[1], n) + body[i+j+2:]
	}
}

type stringBody struct{ *strings.Reader }

func (stringBody) Close() error { return nil }

func httpBody(s string) stringBody { return stringBody{strings.NewReader(s)} }

func wireFiles(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join("testdata", "wire", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no wire files: %v", err)
	}
	sort.Strings(files)
	return files
}

// TestWire replays every golden file in testdata/wire against a fresh server.
func TestWire(t *testing.T) {
	for _, file := range wireFiles(t) {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			wc := parseDirectives(t, string(ar.Comment))
			srv := newWireServer(t, wc)
			defer srv.close()
			var out []txtar.File
			changed := false
			for i := 0; i < len(ar.Files); i++ {
				f := ar.Files[i]
				if f.Name != "request" {
					t.Fatalf("file %d is %q, want request", i, f.Name)
				}
				got := srv.do(t, string(f.Data))
				out = append(out, f)
				want := ""
				if i+1 < len(ar.Files) && ar.Files[i+1].Name == "response" {
					want = string(ar.Files[i+1].Data)
					i++
				}
				if got != want {
					if *update {
						changed = true
					} else {
						t.Errorf("request %d:\n%s\ngot:\n%s\nwant:\n%s", len(out), f.Data, got, want)
					}
				}
				out = append(out, txtar.File{Name: "response", Data: []byte(got)})
			}
			if *update && changed {
				ar.Files = out
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestHTTPContractDoc checks docs/http-contract.md against the golden files:
// every table row names a wire file with a response of the row's status.
func TestHTTPContractDoc(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "http-contract.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	covered := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "|") || strings.Contains(line, "---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 4 {
			continue
		}
		status := strings.Trim(strings.TrimSpace(cells[1]), "`")
		golden := strings.Trim(strings.TrimSpace(cells[len(cells)-1]), "`")
		if !strings.HasSuffix(golden, ".txtar") {
			continue
		}
		rows++
		covered[golden] = true
		ar, err := txtar.ParseFile(filepath.Join("testdata", "wire", golden))
		if err != nil {
			t.Errorf("row %q: %v", line, err)
			continue
		}
		found := false
		for _, f := range ar.Files {
			if f.Name == "response" && strings.HasPrefix(string(f.Data), "HTTP "+status+"\n") {
				found = true
			}
		}
		if !found {
			t.Errorf("docs say %s for %s, but no response in the golden file has that status", status, golden)
		}
	}
	if rows < 12 {
		t.Errorf("only %d rows reference golden files", rows)
	}
	for _, file := range wireFiles(t) {
		if !covered[filepath.Base(file)] {
			t.Errorf("%s is not listed in docs/http-contract.md", filepath.Base(file))
		}
	}
}

// leavingRecorder is a client that goes away once the first flush reached it.
type leavingRecorder struct {
	*httptest.ResponseRecorder
	leave context.CancelFunc
}

func (l *leavingRecorder) Flush() {
	l.ResponseRecorder.Flush()
	l.leave()
}
