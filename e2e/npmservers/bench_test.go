package npmservers

import (
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

// BenchmarkServeStart measures, with the three npm servers installed, how long a
// fresh `toolgate serve` takes until its catalogue holds their tools: cold (no
// catalogue persisted: each server is started to fetch one) and persisted (a second
// start over the same data directory); then the first tool call of the persisted start
// (which starts its server lazily), and the RSS of serve and of its whole process tree
// idle with the three servers running. docs/performance.md records a run:
//
//	go test -run '^$' -bench ServeStart -benchtime 1x ./e2e/npmservers
func BenchmarkServeStart(b *testing.B) {
	for b.Loop() {
		data := filepath.Join(b.TempDir(), "data")
		ws := b.TempDir()
		marker := upstreamtest.Marker(b)
		cfg := serversFor(b, marker, ws, filepath.Join(b.TempDir(), "memory.jsonl"))
		run(b, data, "install", cfg, "--allow-implicit-invocation=true")
		for _, ns := range []string{"everything", "memory", "filesystem"} {
			run(b, data, "grant", "add", "--principal", "default", "--tool", ns+".*", "--action", "execute")
		}
		cold := untilTools(b, data)
		persisted := untilTools(b, data)
		b.ReportMetric(float64(cold.Milliseconds()), "cold_ms")
		b.ReportMetric(float64(persisted.Milliseconds()), "persisted_ms")
		// The first call of a start from the persisted catalogue, and the idle tree.
		srv := testenv.StartServe(b, data, "--listen", "127.0.0.1:0")
		tok := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(data, "owner-token")))))
		s := &session{tb: b, url: srv.URL, token: tok}
		s.call("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}`)
		t0 := time.Now()
		s.call("tools/call", `{"name":"everything.echo","arguments":{"message":"hi"}}`)
		b.ReportMetric(float64(time.Since(t0).Milliseconds()), "first_call_ms")
		t0 = time.Now()
		s.call("tools/call", `{"name":"everything.echo","arguments":{"message":"hi"}}`)
		b.ReportMetric(float64(time.Since(t0).Microseconds()), "second_call_us")
		s.call("tools/call", `{"name":"memory.read_graph","arguments":{}}`)
		s.call("tools/call", `{"name":"filesystem.list_allowed_directories","arguments":{}}`)
		time.Sleep(2 * time.Second)
		pid := srv.Cmd.Process.Pid
		b.ReportMetric(float64(rssKB(pid)), "serve_rss_kb")
		b.ReportMetric(float64(treeRSSKB(pid)), "tree_rss_kb")
		srv.Stop(b, syscall.SIGTERM)
	}
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
			if n["everything.echo"] && n["memory.read_graph"] && n["filesystem.read_text_file"] {
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
