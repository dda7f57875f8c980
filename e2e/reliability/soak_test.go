package reliability

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

type bearerRT struct{ tok string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

// documentedCodes reads the reason codes docs/reason-codes.md lists.
func documentedCodes(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "docs", "reason-codes.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = true
	}
	if len(out) < 10 {
		t.Fatalf("only %d codes found in docs/reason-codes.md", len(out))
	}
	return out
}

// tally is what the clients saw, per tool: answered calls, failures by reason code,
// and calls the client abandoned (cancelled or disconnected) without seeing the answer.
type tally struct {
	mu        sync.Mutex
	ok        map[string]int
	codes     map[string]map[string]int
	abandoned map[string]int
	transport []string // errors that were not a tool result
}

func (y *tally) add(tool, code string) {
	y.mu.Lock()
	defer y.mu.Unlock()
	if code == "" {
		y.ok[tool]++
		return
	}
	if y.codes[tool] == nil {
		y.codes[tool] = map[string]int{}
	}
	y.codes[tool][code]++
}

// slope fits KiB = a + b·minutes by least squares and returns b.
func slope(at []time.Duration, kib []int) float64 {
	n := float64(len(at))
	var sx, sy, sxx, sxy float64
	for i := range at {
		x, y := at[i].Minutes(), float64(kib[i])
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	if d := n*sxx - sx*sx; d != 0 {
		return (n*sxy - sx*sy) / d
	}
	return 0
}

// TestSoak: ten client sessions — six Go SDK ones (three on the stateless
// 2026-07-28 revision, three on 2025-06-18 sessions), two raw Streamable HTTP
// clients whose fx.progress answers stream as SSE and which close the TCP
// connection mid-stream half the time, and two TypeScript SDK ones (Go SDK ones
// without the npm peers) — call a local tool (local.read_file) and the upstream's
// tools (fx.echo, fx.sleep, fx.progress) for TOOLGATE_SOAK (default 60 s). Every 2 s
// the upstream gets a fault in turn: it dies (fx.crash, SIGKILL) and is restarted;
// it hangs (SIGSTOP for 3 s; fx.stall, nothing written at all, for 3 s or for ever:
// its calls then end at the 5 s callTimeout and the unanswered ping that follows
// restarts it); it floods
// (20,000 log notifications in a call, 4 MiB on stderr, a 4 MiB answer). Go SDK
// clients abandon 5 % of calls mid-flight (fx.sleep, or fx.hang, which only the
// client ends: a cancelled context, which sends notifications/cancelled, or the
// session closed under the call) and reconnect. Counted at the end: no process
// left (argv marker, process groups); serve's RSS sampled every second and its
// slope reported; every answer either a result or a documented reason code, and
// only the ones the faults explain; and the audit trail agrees with what the
// clients saw — every allowed call has at most one outcome, each failure seen by a
// client is an outcome event with its code, and the successes are exactly the
// allowed calls without an outcome, give or take the abandoned ones.
func TestSoak(t *testing.T) {
	dur := 60 * time.Second
	if v := os.Getenv("TOOLGATE_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("TOOLGATE_SOAK=%q: %v", v, err)
		}
		dur = d
	}
	docCodes := documentedCodes(t)
	// fx.stall is a -faults tool; the call timeout bounds a call to a hung upstream
	// (docs/mcp-config.md, "Call timeout").
	r := newRigWith(t, map[string]any{"callTimeout": "5s"}, "-faults")
	r.tg(t, "grant", "add", "--principal", "default", "--tool", "local.read_file", "--action", "read")
	ws := filepath.Join(t.TempDir(), "ws")
	os.MkdirAll(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "a.md"), []byte("alpha\n"), 0o644)
	srv := testenv.StartServe(t, r.data, "--listen", "127.0.0.1:0", "--workspace", ws)
	r.session(t, srv.URL, "fx.echo") // the upstream's catalogue is in
	pid := srv.Cmd.Process.Pid
	before := len(r.audit(t)) // the install's and the first catalogue's events

	y := &tally{ok: map[string]int{}, codes: map[string]map[string]int{}, abandoned: map[string]int{}}
	ctx, stop := context.WithTimeout(context.Background(), dur)
	defer stop()
	var wg sync.WaitGroup

	// Memory: serve's RSS every second.
	var at []time.Duration
	var kib []int
	begin := time.Now()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			at, kib = append(at, time.Since(begin)), append(kib, rssKiB(t, pid))
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()

	// Chaos: every 2 s a fault, in turn: the upstream dies (a crashing call, or
	// SIGKILL) and is restarted (`toolgate restart fx`); it hangs for 3 s (SIGSTOP
	// then SIGCONT, or fx.stall: alive but writing nothing, not even a ping's
	// answer); it floods (20,000 log notifications in one call, 4 MiB on stderr, or
	// a 4 MiB answer). A hang or a flood is survived without a restart.
	pgids := map[int]bool{}
	var pgMu sync.Mutex
	var deaths, hangs, floods int
	wg.Add(1)
	go func() {
		defer wg.Done()
		cs := &session{url: srv.URL, token: r.token}
		cs.open()
		chaosCall := func(tool, args string) {
			o, err := cs.call(tool, args)
			if errors.Is(err, errGone) {
				cs = &session{url: srv.URL, token: r.token}
				cs.open()
				o, err = cs.call(tool, args)
			}
			if err != nil {
				y.mu.Lock()
				y.transport = append(y.transport, tool+": "+err.Error())
				y.mu.Unlock()
				return
			}
			y.add(tool, o.code)
		}
		for i := 0; ctx.Err() == nil; i++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
			pids := upstreamtest.Processes(t, r.marker)
			pgMu.Lock()
			for _, p := range pids {
				pgids[pgidOf(p)] = true
			}
			pgMu.Unlock()
			switch round := i / 4; i % 4 {
			case 0, 2: // death
				if i%4 == 0 {
					chaosCall("fx.crash", `{}`)
				} else {
					for _, p := range pids {
						syscall.Kill(p, syscall.SIGKILL)
					}
				}
				deaths++
				if _, errs, code := testenv.Run(t, r.data, "restart", "fx"); code != 0 {
					t.Errorf("toolgate restart fx: %d %s", code, errs)
				}
			case 1: // hang
				switch round % 3 {
				case 0: // frozen for 3 s
					for _, p := range pids {
						syscall.Kill(p, syscall.SIGSTOP)
					}
					time.Sleep(3 * time.Second)
					for _, p := range pids {
						syscall.Kill(p, syscall.SIGCONT)
					}
				case 1: // alive, writing nothing for 3 s
					chaosCall("fx.stall", `{"ms":3000}`)
				case 2: // writing nothing ever again: the call timeout answers the calls and the unanswered ping restarts it
					chaosCall("fx.stall", `{}`)
				}
				hangs++
			case 3: // flood
				switch round % 3 {
				case 0:
					chaosCall("fx.notify", `{"count":20000}`)
				case 1:
					chaosCall("fx.stderr", `{"bytes":4194304}`)
				case 2:
					chaosCall("fx.big", `{"bytes":4194304}`)
				}
				floods++
			}
		}
	}()

	// Ten client sessions: two TypeScript SDK ones when the SDK is installed (8, 9),
	// two raw Streamable HTTP clients whose answers stream as SSE and which
	// disconnect mid-stream (6: stateless 2026-07-28, 7: a 2025-06-18 session), the
	// rest Go SDK ones — even ones the stateless 2026-07-28 revision (the SDK's
	// default: server/discover), odd ones a 2025-06-18 session.
	var calls [10]int
	goSessions := []int{0, 1, 2, 3, 4, 5, 8, 9}
	eras := map[string]int{} // the revision each Go SDK connection negotiated
	progressSeen := 0
	if ts := newTSRunner(t); ts != nil {
		goSessions = []int{0, 1, 2, 3, 4, 5}
		tsDir := t.TempDir()
		for w := 8; w < 10; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; ctx.Err() == nil; j++ {
					var batch [][2]string
					for k := range 20 {
						if k%2 == 0 {
							batch = append(batch, [2]string{"local.read_file", `{"path":"a.md"}`})
						} else {
							batch = append(batch, [2]string{"fx.echo", fmt.Sprintf(`{"text":"ts%d-%d-%d"}`, w, j, k)})
						}
					}
					steps, err := ts.session(context.Background(), tsDir, srv.URL, r.token, batch)
					for _, st := range steps {
						if st.Op != "call" {
							continue
						}
						calls[w]++
						switch {
						case st.Thrown != "" || st.Result == nil:
							y.mu.Lock()
							y.transport = append(y.transport, "ts "+st.Name+": "+st.Thrown)
							y.mu.Unlock()
						case st.Result.IsError:
							code := st.Result.Meta["toolgate/code"]
							if code == "" {
								code = "<none>"
							}
							y.add(st.Name, code)
						default:
							y.add(st.Name, "")
						}
					}
					if err != nil {
						y.mu.Lock()
						y.transport = append(y.transport, "ts session: "+err.Error())
						y.mu.Unlock()
					}
				}
			}()
		}
	}
	for w := 6; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			c := newStreamClient(srv.URL, r.token, w == 6)
			for ctx.Err() == nil {
				calls[w]++
				cut := 0
				if rng.IntN(2) == 0 {
					cut = 1 + rng.IntN(5) // after 1..5 of the 20 progress steps
				}
				cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				o, err := c.call(cctx, "fx.progress", `{"steps":20,"ms":15}`, cut)
				cancel()
				y.mu.Lock()
				progressSeen += o.progress
				switch {
				case err != nil:
					y.transport = append(y.transport, fmt.Sprintf("stream %d fx.progress: %v", w, err))
				case o.cut:
					y.abandoned["fx.progress"]++
				default:
					y.mu.Unlock()
					y.add("fx.progress", o.code)
					y.mu.Lock()
				}
				y.mu.Unlock()
				if err != nil {
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
	for _, w := range goSessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			client := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprintf("soak-%d", w), Version: "1"}, nil)
			var opts *mcp.ClientSessionOptions
			if w%2 == 1 {
				opts = &mcp.ClientSessionOptions{ProtocolVersion: "2025-06-18"}
			}
			connect := func() *mcp.ClientSession {
				for ctx.Err() == nil {
					cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					s, err := client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp",
						HTTPClient: &http.Client{Transport: bearerRT{r.token}}, DisableStandaloneSSE: true, MaxRetries: -1}, opts)
					cancel()
					if err == nil {
						y.mu.Lock()
						eras[s.InitializeResult().ProtocolVersion]++
						y.mu.Unlock()
						return s
					}
					y.mu.Lock()
					y.transport = append(y.transport, "connect: "+err.Error())
					y.mu.Unlock()
					time.Sleep(100 * time.Millisecond)
				}
				return nil
			}
			sess := connect()
			for ctx.Err() == nil && sess != nil {
				calls[w]++
				var p mcp.CallToolParams
				switch k := rng.IntN(10); {
				case k < 4:
					p = mcp.CallToolParams{Name: "local.read_file", Arguments: map[string]any{"path": "a.md"}}
				case k < 8:
					p = mcp.CallToolParams{Name: "fx.echo", Arguments: map[string]any{"text": fmt.Sprintf("w%d-%d", w, calls[w])}}
				default:
					p = mcp.CallToolParams{Name: "fx.sleep", Arguments: map[string]any{"ms": 300}}
				}
				abandon := rng.IntN(20) == 0 // 5 %: the client gives up mid-call
				cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				if abandon {
					// A slow call, or one the upstream never answers (fx.hang: only the
					// client ending it ends it).
					p = mcp.CallToolParams{Name: "fx.sleep", Arguments: map[string]any{"ms": 300}}
					if rng.IntN(2) == 0 {
						p = mcp.CallToolParams{Name: "fx.hang", Arguments: map[string]any{}}
					}
					closeIt := rng.IntN(2) == 0
					s := sess
					time.AfterFunc(time.Duration(20+rng.IntN(100))*time.Millisecond, func() {
						if closeIt {
							s.Close()
						} else {
							cancel()
						}
					})
				}
				res, err := sess.CallTool(cctx, &p)
				cancel()
				if abandon {
					y.mu.Lock()
					y.abandoned[p.Name]++
					y.mu.Unlock()
					sess.Close()
					sess = connect()
					continue
				}
				if err != nil {
					y.mu.Lock()
					y.transport = append(y.transport, p.Name+": "+err.Error())
					y.mu.Unlock()
					sess.Close()
					sess = connect()
					continue
				}
				code := ""
				if res.IsError {
					code, _ = res.Meta["toolgate/code"].(string)
					if code == "" {
						code = "<none>"
					}
				}
				y.add(p.Name, code)
			}
			if sess != nil {
				sess.Close()
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, c := range calls {
		total += c
	}

	// Stop serve: nothing is left.
	fdEnd := fdCount(t, pid)
	if err := srv.Stop(t, syscall.SIGTERM); err != nil {
		t.Errorf("serve: %v", err)
	}
	upstreamtest.WaitGone(t, r.marker, 10*time.Second)
	if left := inGroups(pgids); len(left) != 0 {
		t.Errorf("processes left in the fixtures' groups: %v", left)
	}

	// Errors: each a documented code that this run's faults explain.
	explained := map[string]bool{"upstream_crashed": true, "upstream_unavailable": true, "cancelled": true, "upstream_timeout": true}
	for tool, m := range y.codes {
		for code, n := range m {
			if !docCodes[code] {
				t.Errorf("%s: %d answers with undocumented code %q", tool, n, code)
			} else if !explained[code] {
				t.Errorf("%s: %d answers with code %q, which no fault here explains", tool, n, code)
			} else if tool == "local.read_file" {
				t.Errorf("local.read_file failed %d times with %s: the upstream's faults reached a local tool", n, code)
			}
		}
	}
	if len(y.transport) > 0 {
		t.Errorf("%d calls ended with no tool result, e.g. %q", len(y.transport), y.transport[:min(5, len(y.transport))])
	}

	// The audit trail against what the clients saw.
	events := r.audit(t)[before:]
	allowed := map[string]string{} // call id → tool
	outcome := map[string]string{} // call id → code
	for _, e := range events {
		if strings.HasPrefix(e.Tool, "toolgate.") {
			continue // the chaos's `toolgate restart`, a management change
		}
		switch {
		case e.Decision == "allowed":
			allowed[e.CallID] = e.Tool
		case allowed[e.CallID] != "" && e.Decision == "failed":
			if _, dup := outcome[e.CallID]; dup {
				t.Errorf("call %s has two outcomes", e.CallID)
			}
			outcome[e.CallID] = e.Code
		default:
			t.Errorf("an event that is neither an allowed call nor its outcome: %+v", e)
		}
	}
	perTool := map[string]map[string]int{} // tool → code ("" for no outcome) → count
	for id, tool := range allowed {
		if perTool[tool] == nil {
			perTool[tool] = map[string]int{}
		}
		perTool[tool][outcome[id]]++
	}
	var tools []string
	for tool := range perTool {
		tools = append(tools, tool)
	}
	sort.Strings(tools)
	for _, tool := range tools {
		a := perTool[tool]
		ab := y.abandoned[tool]
		for code, n := range y.codes[tool] {
			// A failure a client saw is an outcome with its code; abandoned calls may add
			// cancelled (or, when the upstream died under them, another fault's) outcomes.
			if a[code] < n || a[code] > n+ab {
				t.Errorf("%s: clients saw %d × %s, the audit has %d (abandoned: %d)", tool, n, code, a[code], ab)
			}
		}
		if a[""] < y.ok[tool] || a[""] > y.ok[tool]+ab {
			t.Errorf("%s: clients saw %d successes, the audit has %d allowed calls without an outcome (abandoned: %d)", tool, y.ok[tool], a[""], ab)
		}
		t.Logf("%s: clients %d ok %v, %d abandoned; audit %v", tool, y.ok[tool], y.codes[tool], ab, a)
	}
	for tool := range y.ok {
		if perTool[tool] == nil {
			t.Errorf("%s: answered calls with no audit event", tool)
		}
	}
	if y.ok["local.read_file"] == 0 || y.ok["fx.echo"] == 0 {
		t.Errorf("the soak made no successful call of a local or an upstream tool: %v", y.ok)
	}
	// Each kind of client and fault took part.
	if eras["2026-07-28"] == 0 || eras["2025-06-18"] == 0 {
		t.Errorf("Go SDK connections by negotiated revision %v; want both 2026-07-28 and 2025-06-18", eras)
	}
	if y.ok["fx.progress"] == 0 || y.abandoned["fx.progress"] == 0 || progressSeen == 0 {
		t.Errorf("streamed calls: %d answered, %d cut mid-stream, %d progress notifications read; want each > 0",
			y.ok["fx.progress"], y.abandoned["fx.progress"], progressSeen)
	}
	if dur >= 30*time.Second && (deaths == 0 || hangs == 0 || floods == 0) {
		t.Errorf("faults: %d deaths, %d hangs, %d floods", deaths, hangs, floods)
	}

	// Memory.
	if len(kib) >= 4 {
		q := len(kib) / 4
		b := slope(at[q:], kib[q:])
		t.Logf("soak %v: %d calls by 10 sessions (%d Go SDK, connections by revision %v; %d calls by TypeScript SDK sessions; %d streamed calls, %d progress notifications read); %d upstream deaths, %d hangs, %d floods; serve RSS %d KiB at %v, %d KiB at the end (max %d), slope %.0f KiB/min after the first quarter; %d descriptors at the end",
			dur, total, len(goSessions), eras, calls[8]+calls[9], calls[6]+calls[7], progressSeen, deaths, hangs, floods, kib[q], at[q].Round(time.Second), kib[len(kib)-1], maxOf(kib), b, fdEnd)
		if kib[len(kib)-1] > 2*kib[q]+32<<10 {
			t.Errorf("serve's RSS grew from %d KiB to %d KiB", kib[q], kib[len(kib)-1])
		}
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		t.Log("stopped early")
	}
}

func maxOf(v []int) int {
	m := 0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}
