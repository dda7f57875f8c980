package upstream_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

func TestHandshake(t *testing.T) {
	c, _, _ := dial(t, upstream.Options{})
	hs := c.Handshake()
	if hs.ProtocolVersion != mcpspec.LatestVersion {
		t.Errorf("protocol version %q", hs.ProtocolVersion)
	}
	if string(hs.ServerInfo) != `{"name":"toolgate-fixture","version":"1.0.0","x-extra":1.50}` {
		t.Errorf("serverInfo not kept as sent: %s", hs.ServerInfo)
	}
	if hs.Instructions != "fixture instructions" {
		t.Errorf("instructions %q", hs.Instructions)
	}
	if v, ok := hs.Capability("experimentalX"); !ok || string(v) != `{"keep":true}` {
		t.Errorf("unknown capability lost: %s %v", v, ok)
	}
	if _, ok := hs.Capability("completions"); ok {
		t.Error("capability the server did not declare reported")
	}
	if c.Transport() != "stdio" {
		t.Errorf("transport %q", c.Transport())
	}
}

func TestVersionNegotiation(t *testing.T) {
	for _, v := range mcpspec.SessionVersions {
		c, _, _ := dial(t, upstream.Options{}, "-version", v)
		if got := c.Handshake().ProtocolVersion; got != v {
			t.Errorf("answered %s, recorded %s", v, got)
		}
	}
	spec, marker := upstreamtest.Spec(t, "-version", "1999-01-01")
	p := upstreamtest.Start(t, spec, marker)
	_, err := upstream.DialStdio(testCtx(t), p, upstream.Options{})
	var uv *upstream.UnsupportedVersionError
	if !errors.As(err, &uv) || uv.Answered != "1999-01-01" {
		t.Fatalf("DialStdio with an unsupported version answered: %v", err)
	}
}

func TestConcurrentCallsCorrelate(t *testing.T) {
	c, _, _ := dial(t, upstream.Options{})
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := fmt.Sprintf("caller-%d", i)
			res, err := c.Call(testCtx(t), "tools/call", json.RawMessage(`{"name":"echo","arguments":{"text":"`+want+`"}}`))
			if err != nil {
				errs <- err
				return
			}
			if got := string(res); got != `{"content":[{"type":"text","text":"`+want+`"}]}` {
				errs <- fmt.Errorf("caller %d got %s", i, got)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

type cancelledRecord struct {
	RequestID json.RawMessage `json:"requestId"`
	What      string          `json:"what"`
	Reason    string          `json:"reason"`
}

func cancellations(t *testing.T, c *upstream.Conn) []cancelledRecord {
	t.Helper()
	var recs []cancelledRecord
	if err := json.Unmarshal([]byte(toolText(t, c, "cancellations", "")), &recs); err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestCancelSendsNotificationsCancelled(t *testing.T) {
	c, _, _ := dial(t, upstream.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"hang"}`))
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the request reach the server
	cancel()
	awaitCancelled(t, done)
	// The notification follows the request on the one stdin; a call made after
	// it is read after it.
	recs := cancellations(t, c)
	if len(recs) != 1 || recs[0].What != "tools/call:hang" || recs[0].Reason != "cancelled" {
		t.Fatalf("server received cancellations %+v, want one naming the hang call, reason cancelled", recs)
	}
	// A context cancelled with a deadline as its cause (the host's call timeout)
	// says so.
	dctx, dcancel := context.WithCancelCause(context.Background())
	go func() {
		_, err := c.Call(dctx, "tools/call", json.RawMessage(`{"name":"hang"}`))
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	dcancel(fmt.Errorf("call timeout: %w", context.DeadlineExceeded))
	awaitCancelled(t, done)
	if recs := cancellations(t, c); len(recs) != 2 || recs[1].Reason != "timed out" {
		t.Fatalf("server received cancellations %+v, want the second with reason \"timed out\"", recs)
	}
}

func TestHangingCallTimesOut(t *testing.T) {
	c, _, _ := dial(t, upstream.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"hang"}`))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call to a hanging tool: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("returned %v after its deadline", d)
	}
	if got := toolText(t, c, "echo", `{"text":"after"}`); got != "after" {
		t.Errorf("connection unusable after a timeout: %q", got)
	}
	if recs := cancellations(t, c); len(recs) != 1 || recs[0].What != "tools/call:hang" {
		t.Errorf("cancellations %+v", recs)
	}
}

func TestHangingInitialize(t *testing.T) {
	spec, marker := upstreamtest.Spec(t, "-hang-init")
	p := upstreamtest.Start(t, spec, marker)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := upstream.DialStdio(ctx, p, upstream.Options{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("DialStdio to a server that never answers initialize: %v", err)
	}
}

// TestCrashMidCallFailsFast: calls in flight when the server dies fail at once
// with the exit status, also when a grandchild keeps stdout open.
func TestCrashMidCallFailsFast(t *testing.T) {
	for _, args := range [][]string{
		{"-crash-after", "300ms"},
		{"-crash-after", "300ms", "-grandchild"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			c, _, _ := dial(t, upstream.Options{}, args...)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second+300*time.Millisecond)
			defer cancel()
			_, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"hang"}`))
			var exited *upstream.ExitedError
			if !errors.Is(err, upstream.ErrClosed) || !errors.As(err, &exited) || exited.Status.Code != 2 {
				t.Fatalf("pending call when the server crashed: %v", err)
			}
			if _, err := c.Call(testCtx(t), "ping", nil); !errors.Is(err, upstream.ErrClosed) {
				t.Errorf("call after the crash: %v", err)
			}
		})
	}
}

func TestStdoutGarbageDroppedAndCounted(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	c, _, _ := dial(t, upstream.Options{Logger: newLogger(&logs, &mu)}, "-noise")
	for i := range 20 {
		if got := toolText(t, c, "echo", fmt.Sprintf(`{"text":"%d"}`, i)); got != fmt.Sprint(i) {
			t.Fatalf("echo %d = %q", i, got)
		}
	}
	if got := toolText(t, c, "noise", ""); got != "noisy" {
		t.Fatalf("noise = %q", got)
	}
	if got := toolText(t, c, "echo", `{"text":"after noise"}`); got != "after noise" {
		t.Fatalf("echo after noise = %q", got)
	}
	st := c.Stats()
	// 23 noise lines (one before each message), then "this is not json",
	// "{broken", "42"; {"hello":"world"} is JSON but not JSON-RPC.
	if st.DroppedLines < 26 || st.BadMessages != 1 {
		t.Errorf("stats %+v", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "noise: this line is not JSON-RPC") {
		t.Errorf("dropped line not logged: %s", logs.String())
	}
	if n := strings.Count(logs.String(), "non-protocol line"); n > 6 {
		t.Errorf("%d log lines for %d dropped lines: not thinned", n, st.DroppedLines)
	}
}

// recordedResult finds, in the fixture's record of its stdout, the result of
// the response that carried text, as raw bytes.
func recordedResult(t *testing.T, file, contains string) json.RawMessage {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if !bytes.Contains(sc.Bytes(), []byte(contains)) {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		if r, ok := m["result"]; ok {
			return r
		}
	}
	t.Fatalf("no recorded response holding %q", contains)
	return nil
}

func TestResultsAreByteExact(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "sent.jsonl")
	c, _, _ := dial(t, upstream.Options{}, "-record", rec)
	list, err := c.Call(testCtx(t), "tools/list", nil)
	if err != nil {
		t.Fatal(err)
	}
	call, err := c.Call(testCtx(t), "tools/call", json.RawMessage(`{"name":"awkward","arguments":{"n":1.50}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"default":1.50`, `"maximum":1e2`, `12345678901234567890`, `"$defs"`, `"x-unknown-field"`, `"x-extra-top":true`} {
		if !bytes.Contains(list, []byte(want)) {
			t.Errorf("tools/list lost %s", want)
		}
	}
	if !bytes.Equal(list, recordedResult(t, rec, `"x-extra-top"`)) {
		t.Errorf("tools/list result differs from the bytes the server wrote:\n%s", list)
	}
	if !bytes.Equal(call, recordedResult(t, rec, `"futureType"`)) || !bytes.Contains(call, []byte(`<b>&amp;</b>`)) {
		t.Errorf("tools/call result differs from the bytes the server wrote:\n%s", call)
	}
}

func TestOversizedResponseFailsOnlyItsCall(t *testing.T) {
	c, _, _ := dial(t, upstream.Options{MaxMessageBytes: 1 << 20})
	_, err := c.Call(testCtx(t), "tools/call", json.RawMessage(`{"name":"big","arguments":{"bytes":3000000}}`))
	var big *upstream.MessageTooLargeError
	if !errors.As(err, &big) || big.Limit != 1<<20 {
		t.Fatalf("oversized answer: %v", err)
	}
	if got := toolText(t, c, "big", `{"bytes":500000}`); len(got) != 500000 {
		t.Errorf("answer under the cap: %d bytes", len(got))
	}
	if st := c.Stats(); st.OversizedMessages != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestRPCErrorKeepsData(t *testing.T) {
	c, _, _ := dial(t, upstream.Options{})
	_, err := c.Call(testCtx(t), "no/such/method", json.RawMessage(`{}`))
	var re *upstream.RPCError
	if !errors.As(err, &re) || re.Code != -32601 || string(re.Data) != `{"detail":1.50}` {
		t.Fatalf("error answer: %#v", err)
	}
}

func TestProgressTokensRewritten(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "sent.jsonl")
	c, _, _ := dial(t, upstream.Options{}, "-record", rec)
	var wg sync.WaitGroup
	for _, steps := range []int{3, 5} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got []string
			params := fmt.Sprintf(`{"name":"progress","arguments":{"steps":%d},"_meta":{"progressToken":"caller-token"}}`, steps)
			res, err := c.CallWithProgress(testCtx(t), "tools/call", json.RawMessage(params), func(p json.RawMessage) {
				got = append(got, string(p))
			})
			if err != nil || !bytes.Contains(res, []byte("done")) {
				t.Errorf("progress call: %s %v", res, err)
				return
			}
			if len(got) != steps {
				t.Errorf("%d steps: %d notifications: %v", steps, len(got), got)
				return
			}
			for i, p := range got {
				want := fmt.Sprintf(`{"progressToken":"caller-token","progress":%d,"total":%d,"message":"step %d"}`, i+1, steps, i+1)
				if p != want {
					t.Errorf("notification %d = %s, want %s", i, p, want)
				}
			}
		}()
	}
	wg.Wait()
	sent, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(sent, []byte("notifications/progress")); n != 8 {
		t.Errorf("server sent %d progress notifications", n)
	}
	if bytes.Contains(sent, []byte("caller-token")) {
		t.Error("the caller's progress token reached the server")
	}
	// Without a callback, the token is still rewritten and progress dropped.
	toolText(t, c, "progress", `{"steps":2},"_meta":{"progressToken":7}`)
	if st := c.Stats(); st.DroppedProgress != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestServerRequests(t *testing.T) {
	c, _, _ := dial(t, upstream.Options{})
	if got := toolText(t, c, "ask", `{"method":"ping"}`); got != "result:{}" {
		t.Errorf("ping from the server answered %q", got)
	}
	if got := toolText(t, c, "ask", `{"method":"roots/list"}`); !strings.HasPrefix(got, `error:{"code":-32601`) {
		t.Errorf("roots/list refused as %q", got)
	}

	var gotParams string
	handler := func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		switch method {
		case "roots/list":
			gotParams = string(params)
			return json.RawMessage(`{"roots":[{"uri":"file:///w","name":"w"}]}`), nil
		case "sampling/createMessage":
			return nil, &upstream.RPCError{Code: -1, Message: "user declined", Data: json.RawMessage(`{"why":"no"}`)}
		case "elicitation/create":
			return nil, errors.New("secret internal detail")
		}
		return upstream.DefaultRequestHandler(ctx, method, params)
	}
	c2, _, _ := dial(t, upstream.Options{OnRequest: handler})
	if got := toolText(t, c2, "ask", `{"method":"roots/list","params":{"x":1.50}}`); got != `result:{"roots":[{"uri":"file:///w","name":"w"}]}` {
		t.Errorf("roots/list answered %q", got)
	}
	if gotParams != `{"x":1.50}` {
		t.Errorf("handler got params %s", gotParams)
	}
	if got := toolText(t, c2, "ask", `{"method":"sampling/createMessage"}`); got != `error:{"code":-1,"message":"user declined","data":{"why":"no"}}` {
		t.Errorf("sampling answered %q", got)
	}
	if got := toolText(t, c2, "ask", `{"method":"elicitation/create"}`); got != `error:{"code":-32603,"message":"internal error"}` {
		t.Errorf("failing handler answered %q", got)
	}
}

func TestInboundRequestsBounded(t *testing.T) {
	entered, release := make(chan struct{}, 4), make(chan struct{})
	handler := func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		entered <- struct{}{}
		<-release
		return nil, nil
	}
	c, _, _ := dial(t, upstream.Options{OnRequest: handler, MaxInboundRequests: 1})
	first := make(chan string, 1)
	go func() { first <- toolText(t, c, "ask", `{"method":"roots/list"}`) }()
	<-entered
	second := toolText(t, c, "ask", `{"method":"roots/list"}`)
	close(release)
	if !strings.Contains(second, "too many requests") {
		t.Errorf("request over the bound answered %q", second)
	}
	if got := <-first; got != "result:{}" {
		t.Errorf("first request answered %q", got)
	}
	if st := c.Stats(); st.RefusedRequests != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestNotificationsReachTheHandler(t *testing.T) {
	got := make(chan upstream.Notification, 100)
	c, _, _ := dial(t, upstream.Options{OnNotification: func(n upstream.Notification) { got <- n }})
	toolText(t, c, "change_tools", "")
	select {
	case n := <-got:
		if n.Method != "notifications/tools/list_changed" {
			t.Errorf("got %s", n.Method)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no list_changed")
	}
	list, err := c.Call(testCtx(t), "tools/list", nil)
	if err != nil || !bytes.Contains(list, []byte(`"added_1"`)) {
		t.Errorf("changed list: %s %v", list, err)
	}
	toolText(t, c, "notify", `{"count":5}`)
	for i := range 5 {
		select {
		case n := <-got:
			if want := fmt.Sprintf(`{"level":"info","data":{"seq":%d}}`, i); n.Method != "notifications/message" || string(n.Params) != want {
				t.Errorf("notification %d: %s %s", i, n.Method, n.Params)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("notification missing")
		}
	}
}

func TestNotificationFloodIsBounded(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var seen []string
	handler := func(n upstream.Notification) {
		<-release
		mu.Lock()
		seen = append(seen, string(n.Params))
		mu.Unlock()
	}
	c, _, _ := dial(t, upstream.Options{OnNotification: handler, NotificationQueue: 8})
	// The handler is stuck: the flood must neither block calls nor pile up.
	toolText(t, c, "notify", `{"count":1000}`)
	if got := toolText(t, c, "echo", `{"text":"unblocked"}`); got != "unblocked" {
		t.Fatalf("echo = %q", got)
	}
	st := c.Stats()
	if st.DroppedNotifications < 1000-8-1 {
		t.Errorf("stats %+v: the queue grew past its bound", st)
	}
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n >= 8 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 || seen[len(seen)-1] != `{"level":"info","data":{"seq":999}}` {
		t.Errorf("the newest notification was not kept: %v", seen)
	}
	if len(seen) > 9 {
		t.Errorf("%d notifications delivered through a queue of 8", len(seen))
	}
}

func TestPing(t *testing.T) {
	c, _, _ := dial(t, upstream.Options{}, "-ping-delay", "2s")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := c.Ping(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow ping: %v", err)
	}
	if err := c.Ping(testCtx(t)); err != nil {
		t.Errorf("ping: %v", err)
	}
}

func TestCallAfterClose(t *testing.T) {
	c, _, _ := dial(t, upstream.Options{})
	c.Close()
	if _, err := c.Call(testCtx(t), "ping", nil); !errors.Is(err, upstream.ErrClosed) {
		t.Fatalf("call after Close: %v", err)
	}
	if c.Err() != nil {
		t.Errorf("Err after Close = %v, want nil", c.Err())
	}
}

// TestSecretsStayOutOfLogsAndErrors puts a canary in a stdio server's
// environment and an HTTP server's headers, provokes every path that logs or
// fails, and looks for the canary everywhere toolgate writes.
func TestSecretsStayOutOfLogsAndErrors(t *testing.T) {
	const canary = "canary-secret-5e1f"
	var logs bytes.Buffer
	var mu sync.Mutex
	log := newLogger(&logs, &mu)
	var seen []string

	spec, marker := upstreamtest.Spec(t)
	spec.Env = map[string]string{"API_TOKEN": canary}
	spec.Logger = log
	c, p, _ := dialSpec(t, spec, marker, upstream.Options{Logger: log})
	toolText(t, c, "leak", "")
	toolText(t, c, "echo", `{"text":"after"}`) // the leak's lines are read by now
	tail := p.StderrTail()
	if !strings.Contains(tail, "config: API_TOKEN=[redacted]") {
		t.Errorf("stderr tail does not show the redacted variable: %s", tail)
	}
	seen = append(seen, tail)
	_, err := c.Call(testCtx(t), "tools/call", json.RawMessage(`{"name":"crash"}`))
	seen = append(seen, err.Error(), fmt.Sprint(c.Err()))

	s := upstreamtest.NewHTTPServer(t, upstreamtest.HTTPServerOptions{Session: true})
	hc := dialHTTP(t, upstream.HTTPSpec{URL: s.URL + "?key=" + canary, Headers: upstream.StaticHeaders{"X-Api-Key": canary}}, upstream.Options{Logger: log})
	s.Refuse(http.StatusUnauthorized, "Bearer")
	_, err = hc.Call(testCtx(t), "ping", nil)
	seen = append(seen, err.Error(), fmt.Sprint(hc.Err()))
	s.Refuse(0, "")
	_, err = upstream.DialHTTP(testCtx(t), upstream.HTTPSpec{URL: "http://127.0.0.1:1/?token=" + canary, Headers: upstream.StaticHeaders{"Authorization": canary}}, upstream.Options{Logger: log})
	seen = append(seen, err.Error())

	mu.Lock()
	seen = append(seen, logs.String())
	mu.Unlock()
	for _, s := range seen {
		if strings.Contains(s, canary) {
			t.Errorf("the secret appears in: %s", s)
		}
	}
}

func TestBatchFromServer(t *testing.T) {
	got := make(chan upstream.Notification, 4)
	c, _, _ := dial(t, upstream.Options{OnNotification: func(n upstream.Notification) { got <- n }})
	if text := toolText(t, c, "batch", ""); text != "batched" {
		t.Fatalf("answer in a batch: %q", text)
	}
	select {
	case n := <-got:
		if n.Method != "notifications/message" || string(n.Params) != `{"level":"info","data":"in a batch"}` {
			t.Errorf("notification in the batch: %s %s", n.Method, n.Params)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("notification in the batch lost")
	}
}

// TestNothingLeaks opens and ends connections every way they end (closed by
// their owner, the process crashing, the process stopped; HTTP closed, HTTP
// refused mid-session) and checks that the goroutine count comes back.
func TestNothingLeaks(t *testing.T) {
	s := upstreamtest.NewHTTPServer(t, upstreamtest.HTTPServerOptions{Session: true})
	run := func() {
		spec, marker := upstreamtest.Spec(t)
		p := upstreamtest.Start(t, spec, marker)
		c, err := upstream.DialStdio(testCtx(t), p, upstream.Options{OnNotification: func(upstream.Notification) {}})
		if err != nil {
			t.Fatal(err)
		}
		toolText(t, c, "echo", `{"text":"x"}`)
		c.Close()
		p.Stop(testCtx(t))

		spec, marker = upstreamtest.Spec(t)
		p = upstreamtest.Start(t, spec, marker)
		c, err = upstream.DialStdio(testCtx(t), p, upstream.Options{})
		if err != nil {
			t.Fatal(err)
		}
		c.Call(testCtx(t), "tools/call", json.RawMessage(`{"name":"crash"}`))
		<-p.Done()

		h, err := upstream.DialHTTP(testCtx(t), upstream.HTTPSpec{URL: s.URL}, upstream.Options{})
		if err != nil {
			t.Fatal(err)
		}
		h.Ping(testCtx(t))
		h.Close()
	}
	run() // warm up: the spawner thread, HTTP keep-alives of the test server
	base := runtime.NumGoroutine()
	for range 5 {
		run()
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines, %d before:\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}
