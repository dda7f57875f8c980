// Command stdioload drives one MCP server over stdio with a closed loop of tools/call
// requests and prints one JSON line: calls/s, latency percentiles and the server's CPU
// per call (its utime+stime from /proc, the children it waited for included). It is
// the stdio counterpart of an HTTP load generator, for side-by-side runs of toolgate's
// local tools against another server's (scripts/bench-local.sh, docs/performance.md).
//
//	stdioload -c 1 -d 10s -tool read_file -args '{"path":"a.txt"}' -- toolgate mcp --workspace W
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	c := flag.Int("c", 1, "requests in flight at once on the one stdio connection")
	d := flag.Duration("d", 10*time.Second, "measured duration")
	warm := flag.Duration("warmup", 2*time.Second, "unmeasured warm-up")
	tool := flag.String("tool", "", "tool to call")
	args := flag.String("args", "{}", "tool arguments (a JSON object)")
	label := flag.String("label", "", "label copied into the report")
	flag.Parse()
	if *tool == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: stdioload -tool NAME [-args JSON] [-c N] [-d DUR] -- CMD [ARGS...]")
		os.Exit(2)
	}
	if !json.Valid([]byte(*args)) {
		fmt.Fprintln(os.Stderr, "stdioload: -args is not JSON")
		os.Exit(2)
	}
	rep, err := run(*c, *d, *warm, *tool, *args, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "stdioload:", err)
		os.Exit(1)
	}
	rep["label"] = *label
	out, _ := json.Marshal(rep)
	fmt.Println(string(out))
}

type client struct {
	mu      sync.Mutex
	w       io.Writer
	next    int
	waiting map[int]chan json.RawMessage
}

func (cl *client) send(method, params string, notify bool) (chan json.RawMessage, error) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if notify {
		_, err := fmt.Fprintf(cl.w, `{"jsonrpc":"2.0","method":%q,"params":%s}`+"\n", method, params)
		return nil, err
	}
	cl.next++
	ch := make(chan json.RawMessage, 1)
	cl.waiting[cl.next] = ch
	_, err := fmt.Fprintf(cl.w, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", cl.next, method, params)
	return ch, err
}

func (cl *client) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var m struct {
			ID     *int            `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil || m.Method != "" {
			continue // a notification or a server request: not an answer
		}
		cl.mu.Lock()
		ch := cl.waiting[*m.ID]
		delete(cl.waiting, *m.ID)
		cl.mu.Unlock()
		if ch != nil {
			if m.Error != nil {
				ch <- nil
			} else {
				ch <- m.Result
			}
		}
	}
	cl.mu.Lock()
	for id, ch := range cl.waiting {
		close(ch)
		delete(cl.waiting, id)
	}
	cl.mu.Unlock()
}

func run(c int, d, warm time.Duration, tool, args string, argv []string) (map[string]any, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = io.Discard
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() { in.Close(); cmd.Process.Kill(); cmd.Wait() }()
	cl := &client{w: in, waiting: map[int]chan json.RawMessage{}}
	go cl.read(out)
	ch, err := cl.send("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"stdioload","version":"1"}}`, false)
	if err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		if r == nil {
			return nil, fmt.Errorf("initialize failed")
		}
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("no answer to initialize")
	}
	cl.send("notifications/initialized", `{}`, true)
	params := fmt.Sprintf(`{"name":%q,"arguments":%s}`, tool, args)

	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	measuring := false
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				t0 := time.Now()
				ch, err := cl.send("tools/call", params, false)
				if err != nil {
					return
				}
				r, ok := <-ch
				el := time.Since(t0)
				mu.Lock()
				if measuring {
					if !ok || r == nil || strings.Contains(string(r), `"isError":true`) {
						errs++
					} else {
						lat = append(lat, el)
					}
				}
				mu.Unlock()
				if !ok {
					return
				}
			}
		}()
	}
	time.Sleep(warm)
	cpu0 := cpuTime(cmd.Process.Pid)
	mu.Lock()
	measuring = true
	t0 := time.Now()
	mu.Unlock()
	time.Sleep(d)
	mu.Lock()
	measuring = false
	el := time.Since(t0)
	n := len(lat)
	sorted := append([]time.Duration(nil), lat...)
	mu.Unlock()
	cpu1 := cpuTime(cmd.Process.Pid)
	close(stop)
	wg.Wait()
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	pct := func(p float64) int64 {
		if len(sorted) == 0 {
			return 0
		}
		return sorted[int(p*float64(len(sorted)-1))].Microseconds()
	}
	rep := map[string]any{
		"c": c, "duration_s": el.Seconds(), "calls": n, "errors": errs,
		"calls_per_s": round1(float64(n) / el.Seconds()),
		"p50_us":      pct(0.50), "p95_us": pct(0.95), "p99_us": pct(0.99),
		"server_cpu_us_per_call": 0.0,
		"server_rss_kb":          rssKB(cmd.Process.Pid),
	}
	if n > 0 {
		rep["server_cpu_us_per_call"] = round1(float64((cpu1 - cpu0).Microseconds()) / float64(n))
	}
	return rep, nil
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

// cpuTime is utime+stime+cutime+cstime of pid (clock ticks at 100 Hz).
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	var ticks int64
	for _, i := range []int{11, 12, 13, 14} { // fields 14-17 of stat, after pid and comm
		v, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

func rssKB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}
