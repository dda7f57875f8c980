package mcpserver_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mcpserver/mcpservertest"
)

// principalTurns opens fake turns and remembers them per principal.
type principalTurns struct {
	mu    sync.Mutex
	turns map[string][]*mcpservertest.Turn
	// empty lists principals whose turns publish no tool.
	empty map[string]bool
}

func (p *principalTurns) open(_ context.Context, principal string) (mcpserver.Turn, error) {
	t := mcpservertest.NewTurn()
	t.Empty = p.empty[principal]
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.turns == nil {
		p.turns = map[string][]*mcpservertest.Turn{}
	}
	p.turns[principal] = append(p.turns[principal], t)
	return t, nil
}

// count returns how many of principal's turns are still open and how many were
// closed.
func (p *principalTurns) count(principal string) (open, closed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.turns[principal] {
		if t.Closed() > 0 {
			closed++
		} else {
			open++
		}
	}
	return open, closed
}

// of returns a copy of principal's turns, in the order they were opened.
func (p *principalTurns) of(principal string) []*mcpservertest.Turn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*mcpservertest.Turn(nil), p.turns[principal]...)
}

func (p *principalTurns) nth(principal string, i int) *mcpservertest.Turn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.turns[principal][i]
}

// tokenIsPrincipal authenticates any non-empty bearer token as the principal
// of that name.
func tokenIsPrincipal(tok string, present bool) (string, bool) { return tok, present && tok != "" }

const pingBody = `{"jsonrpc":"2.0","id":7,"method":"ping"}`

// initAs sends an initialize as principal and returns the answer.
func initAs(h http.Handler, principal string) (code int, session, retryAfter, body string) {
	rec := post(h, initBody, "Authorization", "Bearer "+principal)
	return rec.Code, rec.Header().Get("Mcp-Session-Id"), rec.Header().Get("Retry-After"), rec.Body.String()
}

// pingAs pings session as principal and returns the status.
func pingAs(h http.Handler, principal, session string) int {
	return post(h, pingBody, "Authorization", "Bearer "+principal, "Mcp-Session-Id", session).Code
}

// deleteAs ends session as principal and returns the status.
func deleteAs(h http.Handler, principal, session string) int {
	req := httptest.NewRequest(http.MethodDelete, "/mcp", nil)
	req.Host = "127.0.0.1:7077"
	req.Header.Set("Authorization", "Bearer "+principal)
	req.Header.Set("Mcp-Session-Id", session)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

func checkBookkeeping(t *testing.T, h *mcpserver.Handler) {
	t.Helper()
	if err := mcpserver.CheckSessionBookkeeping(h); err != nil {
		t.Fatal(err)
	}
}

// TestHandlerFloodSparesOtherPrincipals: with the default limits, principal
// alice's 10,000 abandoned initializes never end bob's live (idle) session;
// alice keeps at most her quota, her evicted Turns are closed, and bob can
// still open another session afterwards.
func TestHandlerFloodSparesOtherPrincipals(t *testing.T) {
	var pt principalTurns
	h := mcpserver.NewHandler(mcpserver.HandlerOptions{OpenTurn: pt.open, Authenticate: tokenIsPrincipal})
	defer h.Close()
	code, bob, _, _ := initAs(h, "bob")
	if code != http.StatusOK {
		t.Fatalf("bob's initialize: %d", code)
	}
	quota := mcpserver.DefaultMaxSessionsPerPrincipal
	for i := range 10_000 {
		if code, _, _, body := initAs(h, "alice"); code != http.StatusOK {
			t.Fatalf("alice's initialize %d: %d %s", i, code, body)
		}
		if n := h.Sessions(); n > quota+1 {
			t.Fatalf("after %d initializes: %d sessions", i+1, n)
		}
		if i%1000 == 0 {
			checkBookkeeping(t, h)
		}
	}
	checkBookkeeping(t, h)
	if open, closed := pt.count("alice"); open != quota || closed != 10_000-quota {
		t.Errorf("alice: %d open turns, %d closed; want %d, %d", open, closed, quota, 10_000-quota)
	}
	if open, closed := pt.count("bob"); open != 1 || closed != 0 {
		t.Errorf("bob: %d open turns, %d closed", open, closed)
	}
	if code := pingAs(h, "bob", bob); code != http.StatusOK {
		t.Errorf("bob's session after the flood: %d", code)
	}
	code, bob2, _, _ := initAs(h, "bob")
	if code != http.StatusOK || bob2 == "" || bob2 == bob {
		t.Errorf("bob's second initialize: %d %q", code, bob2)
	}
	if pingAs(h, "bob", bob) != http.StatusOK || pingAs(h, "bob", bob2) != http.StatusOK {
		t.Error("one of bob's sessions ended")
	}
	checkBookkeeping(t, h)
}

// TestHandlerFloodAtGlobalCap: when alice's initializes fill every slot of the
// global cap (her quota as large as the cap), she only ever evicts her own
// sessions; bob's survives, bob at the full cap replaces his own least recently
// used idle session, and carol, who holds none, is refused 503 with
// Retry-After instead of ending anyone's.
func TestHandlerFloodAtGlobalCap(t *testing.T) {
	var pt principalTurns
	h := mcpserver.NewHandler(mcpserver.HandlerOptions{OpenTurn: pt.open, Authenticate: tokenIsPrincipal,
		MaxSessions: 8, MaxSessionsPerPrincipal: 100})
	defer h.Close()
	_, bob, _, _ := initAs(h, "bob")
	for i := range 10_000 {
		if code, _, _, body := initAs(h, "alice"); code != http.StatusOK {
			t.Fatalf("alice's initialize %d: %d %s", i, code, body)
		}
	}
	checkBookkeeping(t, h)
	if h.Sessions() != 8 {
		t.Errorf("%d sessions, want the cap 8", h.Sessions())
	}
	if open, _ := pt.count("alice"); open != 7 {
		t.Errorf("alice holds %d sessions, want 7", open)
	}
	if pingAs(h, "bob", bob) != http.StatusOK {
		t.Fatal("alice's flood ended bob's session")
	}
	code, _, retry, body := initAs(h, "carol")
	if code != http.StatusServiceUnavailable || body != `{"error":"too_many_sessions"}` || retry == "" {
		t.Errorf("carol at the full cap: %d %q Retry-After %q", code, body, retry)
	}
	if open, _ := pt.count("carol"); open != 0 {
		t.Errorf("a refused initialize opened %d turns", open)
	}
	// Bob's ping made his session the most recently used overall; at the
	// cap he may still replace it, and only it.
	code, bob2, _, _ := initAs(h, "bob")
	if code != http.StatusOK {
		t.Fatalf("bob at the full cap: %d", code)
	}
	if pingAs(h, "bob", bob) != http.StatusNotFound || pingAs(h, "bob", bob2) != http.StatusOK {
		t.Error("bob's new session did not replace his own")
	}
	if open, closed := pt.count("alice"); open != 7 || closed != 10_000-7 {
		t.Errorf("alice: %d open, %d closed", open, closed)
	}
	checkBookkeeping(t, h)
}

// TestHandlerQuotaEvictsOwnLeastRecentlyUsed: at her quota, alice's initialize
// ends her own least recently used idle session, not the oldest one she used
// since.
func TestHandlerQuotaEvictsOwnLeastRecentlyUsed(t *testing.T) {
	var pt principalTurns
	h := mcpserver.NewHandler(mcpserver.HandlerOptions{OpenTurn: pt.open, Authenticate: tokenIsPrincipal, MaxSessionsPerPrincipal: 2})
	defer h.Close()
	_, s1, _, _ := initAs(h, "alice")
	_, s2, _, _ := initAs(h, "alice")
	if pingAs(h, "alice", s1) != http.StatusOK {
		t.Fatal("ping s1")
	}
	code, s3, _, _ := initAs(h, "alice")
	if code != http.StatusOK {
		t.Fatalf("third initialize: %d", code)
	}
	if pingAs(h, "alice", s2) != http.StatusNotFound {
		t.Error("s2, the least recently used, is still live")
	}
	if pingAs(h, "alice", s1) != http.StatusOK || pingAs(h, "alice", s3) != http.StatusOK {
		t.Error("s1 or s3 ended")
	}
	if pt.nth("alice", 1).Closed() != 1 || pt.nth("alice", 0).Closed() != 0 {
		t.Error("the wrong turn was closed")
	}
	checkBookkeeping(t, h)
}

// TestHandlerInFlightNeverEvicted: alice's oldest session has a call in
// flight; at her quota, initializes evict her idle sessions around it, and
// when every one of hers is busy she gets 503 with Retry-After: 1 while bob is
// unaffected. The call then completes normally.
func TestHandlerInFlightNeverEvicted(t *testing.T) {
	var pt principalTurns
	h := mcpserver.NewHandler(mcpserver.HandlerOptions{OpenTurn: pt.open, Authenticate: tokenIsPrincipal, MaxSessionsPerPrincipal: 2})
	defer h.Close()
	_, busy, _, _ := initAs(h, "alice")
	done := make(chan string)
	go func() {
		rec := post(h, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test.block"}}`,
			"Authorization", "Bearer alice", "Mcp-Session-Id", busy)
		done <- fmt.Sprint(rec.Code, " ", rec.Body.String())
	}()
	<-pt.nth("alice", 0).Started()
	for i := range 5 {
		if code, _, _, _ := initAs(h, "alice"); code != http.StatusOK {
			t.Fatalf("initialize %d beside the busy session: %d", i, code)
		}
	}
	checkBookkeeping(t, h)
	if open, closed := pt.count("alice"); open != 2 || closed != 4 {
		t.Errorf("alice: %d open turns, %d closed", open, closed)
	}
	if pt.nth("alice", 0).Closed() != 0 {
		t.Fatal("the session with a call in flight was ended")
	}

	// Now make the second session busy too: nothing of alice's is evictable.
	_, busy2, _, _ := initAs(h, "alice")
	done2 := make(chan int)
	go func() {
		done2 <- post(h, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"test.block"}}`,
			"Authorization", "Bearer alice", "Mcp-Session-Id", busy2).Code
	}()
	turns := func() int { open, closed := pt.count("alice"); return open + closed }
	<-pt.nth("alice", turns()-1).Started()
	code, _, retry, body := initAs(h, "alice")
	if code != http.StatusServiceUnavailable || body != `{"error":"too_many_sessions"}` || retry != "1" {
		t.Errorf("alice with every session busy: %d %s Retry-After %q", code, body, retry)
	}
	if code, _, _, _ := initAs(h, "bob"); code != http.StatusOK {
		t.Errorf("bob while alice is at her quota: %d", code)
	}
	checkBookkeeping(t, h)
	pt.nth("alice", 0).Release()
	pt.nth("alice", turns()-1).Release()
	if got := <-done; !strings.HasPrefix(got, "200 ") || !strings.Contains(got, "released") {
		t.Errorf("the in-flight call: %s", got)
	}
	if code := <-done2; code != http.StatusOK {
		t.Errorf("the second call: %d", code)
	}
	if code, _, _, _ := initAs(h, "alice"); code != http.StatusOK {
		t.Errorf("alice once her sessions are idle: %d", code)
	}
	checkBookkeeping(t, h)
}

// TestHandlerRetryAfterAndReaping: at the full cap a principal with no
// session is told to retry when the least recently used idle session's idle
// timeout runs out; the reaper ends it at that moment, and the retry succeeds.
// Sessions used more recently survive.
func TestHandlerRetryAfterAndReaping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pt principalTurns
		h := mcpserver.NewHandler(mcpserver.HandlerOptions{OpenTurn: pt.open, Authenticate: tokenIsPrincipal,
			MaxSessions: 2, IdleTimeout: time.Minute})
		defer h.Close()
		_, alice, _, _ := initAs(h, "alice")
		time.Sleep(15 * time.Second)
		_, bob, _, _ := initAs(h, "bob")
		time.Sleep(25 * time.Second)
		code, _, retry, _ := initAs(h, "carol")
		if code != http.StatusServiceUnavailable || retry != "20" {
			t.Errorf("carol at 40s: %d Retry-After %q, want 503 and 20", code, retry)
		}
		time.Sleep(20*time.Second - time.Nanosecond)
		synctest.Wait()
		if h.Sessions() != 2 {
			t.Fatalf("a session was reaped early: %d left", h.Sessions())
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if h.Sessions() != 1 || pt.nth("alice", 0).Closed() != 1 {
			t.Fatalf("alice's session not reaped at its deadline: %d sessions", h.Sessions())
		}
		if code, _, _, _ := initAs(h, "carol"); code != http.StatusOK {
			t.Errorf("carol's retry: %d", code)
		}
		if pingAs(h, "alice", alice) != http.StatusNotFound || pingAs(h, "bob", bob) != http.StatusOK {
			t.Error("wrong session reaped")
		}
		checkBookkeeping(t, h)
		// With no idle session at all, the hint is the idle timeout, capped.
		code, _, retry, _ = initAs(h, "dave")
		if code != http.StatusServiceUnavailable || retry == "" {
			t.Errorf("dave at the full cap: %d Retry-After %q", code, retry)
		}
	})
}

// TestHandlerRetryAfterCapped: the hint never exceeds a minute, however long
// the idle timeout.
func TestHandlerRetryAfterCapped(t *testing.T) {
	var pt principalTurns
	h := mcpserver.NewHandler(mcpserver.HandlerOptions{OpenTurn: pt.open, Authenticate: tokenIsPrincipal, MaxSessions: 1})
	defer h.Close()
	initAs(h, "alice")
	if code, _, retry, _ := initAs(h, "bob"); code != http.StatusServiceUnavailable || retry != "60" {
		t.Errorf("bob: %d Retry-After %q, want 503 and 60", code, retry)
	}
}

// TestHandlerLimitsConcurrent: many clients of one principal initialize,
// ping and delete at once while another principal uses its session. Every
// answer is 200, 404 (a session of its own was evicted between requests) or
// 503; the other principal never sees a failure; the bookkeeping stays exact.
func TestHandlerLimitsConcurrent(t *testing.T) {
	var pt principalTurns
	h := mcpserver.NewHandler(mcpserver.HandlerOptions{OpenTurn: pt.open, Authenticate: tokenIsPrincipal,
		MaxSessions: 6, MaxSessionsPerPrincipal: 3})
	defer h.Close()
	_, bob, _, _ := initAs(h, "bob")
	stop := make(chan struct{})
	var bobFailures atomic.Int32
	var bobDone sync.WaitGroup
	bobDone.Add(1)
	go func() {
		defer bobDone.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if pingAs(h, "bob", bob) != http.StatusOK {
				bobFailures.Add(1)
			}
		}
	}()
	var wg sync.WaitGroup
	var unexpected atomic.Int32
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				code, sid, _, _ := initAs(h, "alice")
				switch code {
				case http.StatusOK:
				case http.StatusServiceUnavailable:
					continue
				default:
					unexpected.Add(1)
					continue
				}
				if c := pingAs(h, "alice", sid); c != http.StatusOK && c != http.StatusNotFound {
					unexpected.Add(1)
				}
				if (w+i)%3 == 0 {
					if c := deleteAs(h, "alice", sid); c != http.StatusOK && c != http.StatusNotFound {
						unexpected.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	bobDone.Wait()
	if n := bobFailures.Load(); n != 0 {
		t.Errorf("bob's pings failed %d times", n)
	}
	if n := unexpected.Load(); n != 0 {
		t.Errorf("%d unexpected answers to alice", n)
	}
	checkBookkeeping(t, h)
	open, closed := pt.count("alice")
	if open > 3 || open+closed == 0 {
		t.Errorf("alice: %d open turns, %d closed", open, closed)
	}
	if h.Sessions() != open+1 {
		t.Errorf("%d sessions, alice has %d open turns", h.Sessions(), open)
	}
}

// TestHandlerCloseWhileOpening: Close while an initialize's Turn is opening;
// that initialize gets 404 unknown_session and its Turn is closed, and nothing
// is left behind.
func TestHandlerCloseWhileOpening(t *testing.T) {
	entered := make(chan struct{})
	proceed := make(chan struct{})
	turn := mcpservertest.NewTurn()
	h := mcpserver.NewHandler(mcpserver.HandlerOptions{OpenTurn: func(context.Context, string) (mcpserver.Turn, error) {
		close(entered)
		<-proceed
		return turn, nil
	}})
	done := make(chan int)
	go func() { done <- post(h, initBody).Code }()
	<-entered
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	close(proceed)
	if code := <-done; code != http.StatusNotFound {
		t.Errorf("initialize across Close: %d", code)
	}
	if turn.Closed() != 1 || h.Sessions() != 0 {
		t.Errorf("turn closed %d times, %d sessions", turn.Closed(), h.Sessions())
	}
	checkBookkeeping(t, h)
}

// TestHandlerDeleteFreesQuota: DELETE gives the principal's place back at once.
func TestHandlerDeleteFreesQuota(t *testing.T) {
	var pt principalTurns
	h := mcpserver.NewHandler(mcpserver.HandlerOptions{OpenTurn: pt.open, Authenticate: tokenIsPrincipal, MaxSessions: 1})
	defer h.Close()
	_, s, _, _ := initAs(h, "alice")
	if code, _, _, _ := initAs(h, "bob"); code != http.StatusServiceUnavailable {
		t.Fatalf("bob at the cap: %d", code)
	}
	if code := deleteAs(h, "alice", s); code != http.StatusOK {
		t.Fatalf("DELETE: %d", code)
	}
	checkBookkeeping(t, h)
	if code, _, _, _ := initAs(h, "bob"); code != http.StatusOK {
		t.Errorf("bob after alice's DELETE: %d", code)
	}
	checkBookkeeping(t, h)
}

// BenchmarkHandlerInitializeAtCap measures one initialize when the handler is
// full: sessions-1 idle sessions of other principals and one of the caller's,
// which each initialize replaces. The cost should not grow with the number of
// sessions.
func BenchmarkHandlerInitializeAtCap(b *testing.B) {
	for _, n := range []int{1024, 16384, 65536} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			h := mcpserver.NewHandler(mcpserver.HandlerOptions{
				OpenTurn: func(context.Context, string) (mcpserver.Turn, error) {
					return mcpservertest.NewTurn(), nil
				},
				Authenticate: tokenIsPrincipal, MaxSessions: n,
			})
			defer h.Close()
			for i := range n - 1 {
				if code, _, _, _ := initAs(h, fmt.Sprint("p", i)); code != http.StatusOK {
					b.Fatalf("filling: %d", code)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				if code, _, _, _ := initAs(h, "alice"); code != http.StatusOK {
					b.Fatalf("initialize at the cap: %d", code)
				}
			}
		})
	}
}

// FuzzHandlerSessionLimits replays a sequence of initializes, pings and
// DELETEs by three principals against a handler with small limits, and checks
// every answer against a model of the policy: at its quota or the full cap a
// principal's initialize replaces its own least recently used session, or is
// 503 when it has none; no other principal's session ever ends; the registry's
// bookkeeping stays exact after every step.
func FuzzHandlerSessionLimits(f *testing.F) {
	f.Add(uint8(3), uint8(2), []byte{0, 0, 0, 4, 4, 8, 8, 8, 1, 5, 2, 6, 0})
	f.Add(uint8(1), uint8(1), []byte{0, 4, 8, 2, 4, 0})
	f.Add(uint8(6), uint8(6), []byte{0, 0, 0, 0, 0, 0, 4, 8, 16, 17, 33, 0})
	f.Fuzz(func(t *testing.T, maxSessions, perPrincipal uint8, ops []byte) {
		capN, quota := int(maxSessions%8)+1, int(perPrincipal%8)+1
		if len(ops) > 200 {
			ops = ops[:200]
		}
		h := mcpserver.NewHandler(mcpserver.HandlerOptions{
			OpenTurn: func(context.Context, string) (mcpserver.Turn, error) {
				return mcpservertest.NewTurn(), nil
			},
			Authenticate: tokenIsPrincipal, MaxSessions: capN, MaxSessionsPerPrincipal: quota,
		})
		defer h.Close()
		quota = min(quota, capN)
		principals := []string{"alice", "bob", "carol"}
		// model[p] lists p's live sessions, least recently used first.
		model := map[string][]string{}
		total := func() int { return len(model["alice"]) + len(model["bob"]) + len(model["carol"]) }
		touch := func(p, id string) {
			l := slices.DeleteFunc(model[p], func(s string) bool { return s == id })
			model[p] = append(l, id)
		}
		for step, op := range ops {
			p := principals[int(op>>2)%3]
			own := model[p]
			switch op & 3 {
			case 0, 3: // initialize
				full := len(own) >= quota || total() >= capN
				code, id, retry, _ := initAs(h, p)
				switch {
				case full && len(own) == 0:
					if code != http.StatusServiceUnavailable || retry == "" {
						t.Fatalf("step %d: %s at the limits with nothing of its own: %d, Retry-After %q", step, p, code, retry)
					}
				case code != http.StatusOK:
					t.Fatalf("step %d: %s's initialize: %d", step, p, code)
				default:
					if full {
						victim := own[0]
						model[p] = own[1:]
						if pingAs(h, p, victim) != http.StatusNotFound {
							t.Fatalf("step %d: %s's least recently used session survived", step, p)
						}
					}
					model[p] = append(model[p], id)
				}
			case 1: // ping one of its own
				if len(own) == 0 {
					continue
				}
				id := own[int(op>>4)%len(own)]
				if code := pingAs(h, p, id); code != http.StatusOK {
					t.Fatalf("step %d: %s's live session answered %d", step, p, code)
				}
				touch(p, id)
			case 2: // DELETE one of its own
				if len(own) == 0 {
					continue
				}
				i := int(op>>4) % len(own)
				if code := deleteAs(h, p, own[i]); code != http.StatusOK {
					t.Fatalf("step %d: DELETE: %d", step, code)
				}
				model[p] = slices.Delete(slices.Clone(own), i, i+1)
			}
			if err := mcpserver.CheckSessionBookkeeping(h); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			if h.Sessions() != total() {
				t.Fatalf("step %d: %d sessions, the model has %d", step, h.Sessions(), total())
			}
		}
		// Every session the model holds is still live, for its own principal
		// only. (Pinging refreshes them, so this comes last.)
		for _, p := range principals {
			for _, id := range model[p] {
				if pingAs(h, p, id) != http.StatusOK {
					t.Fatalf("%s's session %s ended", p, id)
				}
			}
		}
	})
}
