package npmservers

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// BenchmarkServeStart measures, with five npm servers installed (the three of the
// tests, sequential-thinking and github), how long a fresh `toolgate serve` takes
// until its catalogue holds their tools: cold (no catalogue persisted: each server is
// started to fetch one) and persisted (a second start over the same data directory).
// Then, on starts from the persisted catalogue, a harness's first call: at once after
// initialize and tools/list (first_call_ms: the session's open warmed the servers, and
// the call waits for what is left of everything's start), and the same after 500 ms
// of the harness thinking (first_call_thought_ms); then the RSS of serve and of its
// whole process tree idle with the five servers running. docs/performance.md records
// a run:
//
//	go test -run '^$' -bench ServeStart -benchtime 1x ./e2e/npmservers
func BenchmarkServeStart(b *testing.B) {
	for b.Loop() {
		data := filepath.Join(b.TempDir(), "data")
		ws := b.TempDir()
		marker := upstreamtest.Marker(b)
		cfg := fiveServers(b, serversFor(b, marker, ws, filepath.Join(b.TempDir(), "memory.jsonl")))
		run(b, data, "install", cfg, "--allow-implicit-invocation=true")
		for _, ns := range []string{"everything", "memory", "filesystem", "thinking", "github"} {
			run(b, data, "grant", "add", "--principal", "default", "--tool", ns+".*", "--action", "execute")
		}
		cold := untilTools(b, data)
		persisted := untilTools(b, data)
		b.ReportMetric(float64(cold.Milliseconds()), "cold_ms")
		b.ReportMetric(float64(persisted.Milliseconds()), "persisted_ms")
		// The first call of a start from the persisted catalogue: at once, then (a new
		// start) after the harness's thinking.
		fc := firstCall(b, data, 0)
		b.ReportMetric(float64(fc.initialize.Microseconds()), "initialize_us")
		b.ReportMetric(float64(fc.list.Microseconds()), "first_list_us")
		b.ReportMetric(float64(fc.call.Milliseconds()), "first_call_ms")
		b.ReportMetric(float64(firstCall(b, data, 500*time.Millisecond).call.Milliseconds()), "first_call_thought_ms")
		// The idle tree.
		srv := testenv.StartServe(b, data, "--listen", "127.0.0.1:0")
		tok := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(data, "owner-token")))))
		s := &session{tb: b, url: srv.URL, token: tok}
		s.call("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}`)
		s.call("tools/call", `{"name":"everything.echo","arguments":{"message":"hi"}}`)
		t0 := time.Now()
		s.call("tools/call", `{"name":"everything.echo","arguments":{"message":"hi"}}`)
		b.ReportMetric(float64(time.Since(t0).Microseconds()), "second_call_us")
		s.call("tools/call", `{"name":"memory.read_graph","arguments":{}}`)
		s.call("tools/call", `{"name":"filesystem.list_allowed_directories","arguments":{}}`)
		s.call("tools/list", `{}`)
		time.Sleep(2 * time.Second)
		pid := srv.Cmd.Process.Pid
		b.ReportMetric(float64(rssKB(pid)), "serve_rss_kb")
		b.ReportMetric(float64(treeRSSKB(pid)), "tree_rss_kb")
		srv.Stop(b, syscall.SIGTERM)
	}
}

// firstCall starts serve over data (its catalogue persisted), opens a session as a
// harness does (initialize, tools/list), waits think, and returns how long the first
// tools/call took (and the initialize and tools/list before it, the first requests of
// the process); it stops serve before returning.
func firstCall(b *testing.B, data string, think time.Duration) (d struct{ initialize, list, call time.Duration }) {
	b.Helper()
	srv := testenv.StartServe(b, data, "--listen", "127.0.0.1:0")
	defer srv.Stop(b, syscall.SIGTERM)
	tok := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(data, "owner-token")))))
	s := &session{tb: b, url: srv.URL, token: tok}
	t0 := time.Now()
	s.call("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}`)
	d.initialize = time.Since(t0)
	t0 = time.Now()
	s.call("tools/list", `{}`)
	d.list = time.Since(t0)
	time.Sleep(think)
	t0 = time.Now()
	s.call("tools/call", `{"name":"everything.echo","arguments":{"message":"hi"}}`)
	d.call = time.Since(t0)
	return d
}

// fiveServers adds sequential-thinking (as "thinking") and github to the three
// servers of the mcpServers file at cfg, and returns the new file.
func fiveServers(b *testing.B, cfg string) string {
	b.Helper()
	var doc map[string]map[string]any
	if err := json.Unmarshal(must(os.ReadFile(cfg)), &doc); err != nil {
		b.Fatal(err)
	}
	node := testenv.Node(b)
	pkg := func(name string) string {
		return testenv.NPMPackageFile(b, "@modelcontextprotocol/"+name, "dist/index.js")
	}
	doc["mcpServers"]["thinking"] = map[string]any{"command": node, "args": []string{pkg("server-sequential-thinking")}}
	doc["mcpServers"]["github"] = map[string]any{"command": node, "args": []string{pkg("server-github")}}
	out, _ := json.Marshal(doc)
	p := filepath.Join(b.TempDir(), "mcp5.json")
	if err := os.WriteFile(p, out, 0o600); err != nil {
		b.Fatal(err)
	}
	return p
}

// untilTools starts serve over data and returns how long until tools/list holds the
// three servers' tools; it stops serve before returning.
func untilTools(b *testing.B, data string) time.Duration {
	b.Helper()
	t0 := time.Now()
	srv := testenv.StartServe(b, data, "--listen", "127.0.0.1:0")
	tok := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(data, "owner-token")))))
	for {
		s := &session{tb: b, url: srv.URL, token: tok}
		s.call("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}`)
		if l, ok := s.try("tools/list", `{}`); ok {
			n := toolNames(b, l)
			if n["everything.echo"] && n["memory.read_graph"] && n["filesystem.read_text_file"] &&
				n["thinking.sequentialthinking"] && n["github.create_issue"] {
				d := time.Since(t0)
				srv.Stop(b, syscall.SIGTERM)
				return d
			}
		}
		if time.Since(t0) > time.Minute {
			b.Fatal("the tools never appeared")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func rssKB(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}

// treeRSSKB sums the RSS of pid and every descendant.
func treeRSSKB(pid int) int64 {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(st)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		pp, _ := strconv.Atoi(f[1])
		children[pp] = append(children[pp], p)
	}
	var sum int64
	var walk func(int)
	walk = func(p int) {
		sum += rssKB(p)
		for _, c := range children[p] {
			walk(c)
		}
	}
	walk(pid)
	return sum
}
