package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func TestIDScan(t *testing.T) {
	cases := []struct {
		in        string
		id        string
		hasMethod bool
	}{
		{`{"jsonrpc":"2.0","id":42,"result":{"x":"}"}}`, `42`, false},
		{`{"result":{"id":9,"s":"\"id\":7"},"jsonrpc":"2.0","id":3}`, `3`, false},
		{`  {"id":"s\"x","method":"m","params":[{"id":1}]}`, `"s\"x"`, true},
		{`{"method":"notifications/message","params":{"id":5}}`, ``, true},
		{`{"i\u0064":4,"error":{}}`, ``, false},
		{`{"idx":4,"error":{}}`, ``, false},
		{`[{"id":1}]`, ``, false},
		{`not json at all {"id":1}`, ``, false},
		{`{"id":` + strings.Repeat("1", 100) + `}`, ``, false},
		{`{"id" : 12 , "result" : 1}`, `12`, false},
	}
	for _, tc := range cases {
		for _, chunk := range []int{1, 2, 3, 7, len(tc.in)} {
			var s idScan
			for i := 0; i < len(tc.in); i += chunk {
				s.feed([]byte(tc.in[i:min(i+chunk, len(tc.in))]))
			}
			if got := string(s.id()); got != tc.id || s.hasMethod != tc.hasMethod {
				t.Errorf("%s (chunks of %d): id %q method %v, want %q %v", tc.in, chunk, got, s.hasMethod, tc.id, tc.hasMethod)
			}
		}
	}
}

// filterAll runs input through a lineFilter reading n bytes at a time.
func filterAll(t testing.TB, input string, max, n int) (string, *counters, []string) {
	var st counters
	var ids []string
	f := newLineFilter(io.NopCloser(strings.NewReader(input)), max, slog.New(slog.DiscardHandler), &st)
	f.onOversize = func(id json.RawMessage, isRequest bool) {
		ids = append(ids, string(id)+map[bool]string{true: "/request", false: ""}[isRequest])
	}
	var out bytes.Buffer
	buf := make([]byte, n)
	for {
		k, err := f.Read(buf)
		out.Write(buf[:k])
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("read: %v", err)
			}
			if !f.Failed() {
				t.Fatal("Failed is false after an error")
			}
			break
		}
	}
	return out.String(), &st, ids
}

func TestLineFilter(t *testing.T) {
	big := `{"jsonrpc":"2.0","result":{"text":"` + strings.Repeat("x", 300) + `"},"id":7}`
	input := "banner line\n" +
		`{"jsonrpc":"2.0","id":1,"result":{}}` + "\r\n" +
		"\n   \n" +
		`{broken` + "\n" +
		"42\n" +
		big + "\n" +
		`{"jsonrpc":"2.0","id":"r1","method":"ping","params":{"pad":"` + strings.Repeat("y", 300) + `"}}` + "\n" +
		`[{"jsonrpc":"2.0","method":"a"}]` + "\n" +
		`{"jsonrpc":"2.0","id":2,"result":{"tail":true}}` // no final newline
	want := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" +
		`[{"jsonrpc":"2.0","method":"a"}]` + "\n" +
		`{"jsonrpc":"2.0","id":2,"result":{"tail":true}}` + "\n"
	for _, n := range []int{1, 5, 64, 4096} {
		got, st, ids := filterAll(t, input, 200, n)
		if got != want {
			t.Errorf("read %d at a time:\n got %q\nwant %q", n, got, want)
		}
		if st.droppedLines.Load() != 3 || st.oversized.Load() != 2 {
			t.Errorf("dropped %d, oversized %d", st.droppedLines.Load(), st.oversized.Load())
		}
		if strings.Join(ids, ",") != `7,"r1"/request` {
			t.Errorf("oversized ids %v", ids)
		}
	}
	// A line longer than the reader's own buffer, under the cap, is whole.
	long := `{"v":"` + strings.Repeat("z", 200<<10) + `"}`
	if got, _, _ := filterAll(t, long+"\n", 1<<20, 32<<10); got != long+"\n" {
		t.Errorf("long line: %d bytes out of %d", len(got), len(long)+1)
	}
}

func FuzzLineFilter(f *testing.F) {
	f.Add("garbage\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n[1,2]\n{\"id\":", 64)
	f.Add(`{"result":{"x":"`+strings.Repeat("a", 100)+`"},"id":99}`+"\n", 32)
	f.Fuzz(func(t *testing.T, input string, max int) {
		max = 16 + max%512
		if max < 16 {
			max += 512
		}
		out, _, _ := filterAll(t, input, max, 7)
		for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if out == "" {
				break
			}
			if len(line) > max || !json.Valid([]byte(line)) || (line[0] != '{' && line[0] != '[') {
				t.Fatalf("forwarded %q", line)
			}
		}
	})
}

func TestReadEvents(t *testing.T) {
	stream := ": comment\r\n" +
		"event: message\r\nid: 1\r\ndata: {\"a\":\r\ndata:  1.50}\r\n\r\n" +
		"retry: 250\n\n" +
		"data: {\"b\":2}\n\n" +
		"event: other\ndata: x\n\n" +
		"data: unterminated"
	var got []sseEvent
	err := readEvents(strings.NewReader(stream), 1<<10, func(ev *sseEvent) { got = append(got, *ev) })
	if !errors.Is(err, io.EOF) {
		t.Fatalf("end: %v", err)
	}
	want := []sseEvent{
		{name: "message", id: "1", data: []byte("{\"a\":\n 1.50}")},
		{retry: 250 * time.Millisecond},
		{data: []byte(`{"b":2}`)},
		{name: "other", data: []byte("x")},
	}
	if len(got) != len(want) {
		t.Fatalf("events %+v", got)
	}
	for i := range want {
		if got[i].name != want[i].name || got[i].id != want[i].id || string(got[i].data) != string(want[i].data) || got[i].retry != want[i].retry {
			t.Errorf("event %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	err = readEvents(strings.NewReader("data: "+strings.Repeat("x", 2000)+"\n\n"), 1<<10, func(*sseEvent) { t.Error("oversized event delivered") })
	var big *MessageTooLargeError
	if !errors.As(err, &big) {
		t.Errorf("oversized event: %v", err)
	}
}

func TestTail(t *testing.T) {
	tl := newTail(100, 3)
	for i := range 50 {
		tl.Write([]byte(strings.Repeat(string(rune('a'+i%26)), 9) + "\n"))
	}
	if got := tl.String(); got != "vvvvvvvvv\nwwwwwwwww\nxxxxxxxxx\n" {
		t.Errorf("tail %q", got)
	}
	tl = newTail(10, 5)
	tl.Write([]byte(strings.Repeat("q", 50) + "\nend"))
	if got := tl.String(); got != "end" {
		t.Errorf("tail after a huge write %q", got)
	}
	if tl.Total() != 54 {
		t.Errorf("total %d", tl.Total())
	}
}

func TestRewriteProgressToken(t *testing.T) {
	in := json.RawMessage(`{"name":"x","arguments":{"n":1.50,"s":"<&>"},"_meta":{"progressToken":"tok","other":1e2}}`)
	out, tok, ok := rewriteProgressToken(in, 17)
	if !ok || string(tok) != `"tok"` {
		t.Fatalf("rewrite: %s %s %v", out, tok, ok)
	}
	if want := `{"name":"x","arguments":{"n":1.50,"s":"<&>"},"_meta":{"progressToken":17,"other":1e2}}`; string(out) != want {
		t.Errorf("rewritten %s, want %s", out, want)
	}
	for _, p := range []string{`{"name":"x"}`, `{"_meta":{}}`, `{"_meta":"progressToken"}`, `not json "progressToken"`} {
		if out, _, ok := rewriteProgressToken(json.RawMessage(p), 1); ok || string(out) != p {
			t.Errorf("%s rewritten to %s", p, out)
		}
	}
	spaced := json.RawMessage(`{ "_meta" : { "progressToken" : {"odd":[1]} , "x":1}, "_meta2":{"progressToken":1}}`)
	if out, tok, ok := rewriteProgressToken(spaced, 3); !ok || string(tok) != `{"odd":[1]}` ||
		string(out) != `{ "_meta" : { "progressToken" : 3 , "x":1}, "_meta2":{"progressToken":1}}` {
		t.Errorf("spaced: %s %s %v", out, tok, ok)
	}
	back, ok := restoreProgressToken(json.RawMessage(`{"progress":1,"progressToken":3,"total":2.50}`), json.RawMessage(`"caller"`))
	if !ok || string(back) != `{"progress":1,"progressToken":"caller","total":2.50}` {
		t.Errorf("restored %s %v", back, ok)
	}
	if id, ok := progressID(json.RawMessage(`{"progressToken":"17"}`)); !ok || id != 17 {
		t.Errorf("string token: %d %v", id, ok)
	}
}

// fakeConn is an mcp.Connection whose writes can be held, as a server that
// stops reading its stdin holds them, and which answers initialize itself.
type fakeConn struct {
	gate   chan struct{} // writes wait while it is open
	mu     sync.Mutex
	writes []jsonrpc.Message
	reads  chan jsonrpc.Message
	closed chan struct{}
	once   sync.Once
}

func newFakeConn() *fakeConn {
	g := make(chan struct{})
	close(g)
	return &fakeConn{gate: g, reads: make(chan jsonrpc.Message, 16), closed: make(chan struct{})}
}

func (f *fakeConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-f.reads:
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-f.closed:
		return nil, io.EOF
	}
}

func (f *fakeConn) Write(ctx context.Context, m jsonrpc.Message) error {
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	select {
	case <-gate:
	case <-f.closed:
		return io.ErrClosedPipe
	}
	f.mu.Lock()
	f.writes = append(f.writes, m)
	f.mu.Unlock()
	if r, ok := m.(*jsonrpc.Request); ok {
		switch r.Method {
		case "initialize":
			f.reads <- &jsonrpc.Response{ID: r.ID, Result: json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"fake","version":"0"}}`)}
		case "string/id": // answered with the id as a string, as some servers do
			id, _ := jsonrpc.MakeID(fmt.Sprint(r.ID.Raw()))
			f.reads <- &jsonrpc.Response{ID: id, Result: json.RawMessage(`{"ok":true}`)}
		}
	}
	return nil
}

func (f *fakeConn) Close() error      { f.once.Do(func() { close(f.closed) }); return nil }
func (f *fakeConn) SessionID() string { return "" }

func (f *fakeConn) hold() {
	f.mu.Lock()
	f.gate = make(chan struct{})
	f.mu.Unlock()
}

func (f *fakeConn) release() {
	f.mu.Lock()
	close(f.gate)
	f.mu.Unlock()
}

func (f *fakeConn) written() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, m := range f.writes {
		b, _ := jsonrpc.EncodeMessage(m)
		out = append(out, string(b))
	}
	return out
}

// startFake opens a serial connection (as stdio's) over a fakeConn.
func startFake(t *testing.T) (*Conn, *fakeConn) {
	f := newFakeConn()
	c := newConn(Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.start(ctx, transport{conn: f, kind: "fake", serial: true, terminal: func(error) bool { return true }}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, f
}

// TestCancelBeforeWrite: a call cancelled while its request still waits for a
// stuck writer returns at once and is never sent, nor is its cancellation; a
// call cancelled after its request went out is followed by notifications/cancelled.
func TestCancelBeforeWrite(t *testing.T) {
	c, f := startFake(t)
	f.hold()
	ctxA, cancelA := context.WithCancel(context.Background())
	doneA := make(chan error, 1)
	go func() { _, err := c.Call(ctxA, "a/method", nil); doneA <- err }()
	time.Sleep(50 * time.Millisecond) // the writer now holds A, stuck
	ctxB, cancelB := context.WithCancel(context.Background())
	doneB := make(chan error, 1)
	go func() { _, err := c.Call(ctxB, "b/method", nil); doneB <- err }()
	time.Sleep(50 * time.Millisecond) // B waits in the queue
	cancelB()
	select {
	case err := <-doneB:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("B: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a call waiting behind a stuck write did not return when cancelled")
	}
	f.release()
	time.Sleep(50 * time.Millisecond) // A is written now
	cancelA()
	if err := <-doneA; !errors.Is(err, context.Canceled) {
		t.Fatalf("A: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(f.written()) < 4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := f.written()
	want := []string{
		`"method":"initialize"`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"a/method"}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"cancelled"}}`,
	}
	if len(got) != len(want) {
		t.Fatalf("written %q", got)
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("write %d = %s, want %s", i, got[i], want[i])
		}
	}
}

func TestStringIDAnswered(t *testing.T) {
	c, _ := startFake(t)
	if res, err := c.Call(context.Background(), "string/id", nil); err != nil || string(res) != `{"ok":true}` {
		t.Fatalf("answer with a string id: %s %v", res, err)
	}
}

func TestWithMeta(t *testing.T) {
	own := []byte(`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`)
	for in, want := range map[string]string{
		``:                   `{"_meta":{` + string(own) + `}}`,
		`null`:               `{"_meta":{` + string(own) + `}}`,
		`{}`:                 `{"_meta":{` + string(own) + `}}`,
		` { } `:              `{ ,"_meta":{` + string(own) + `}}`,
		`{"a":1.50}`:         `{"a":1.50,"_meta":{` + string(own) + `}}`,
		`{"a":1,"_meta":{}}`: `{"a":1,"_meta":{` + string(own) + `}}`,
		`{"_meta":{"progressToken":7, "x" : 1e2},"b":[1]}`:                                 `{"_meta":{"progressToken":7,"x" : 1e2,` + string(own) + `},"b":[1]}`,
		`{"_meta":{"io.modelcontextprotocol/protocolVersion":"1999","progressToken":"t"}}`: `{"_meta":{"progressToken":"t",` + string(own) + `}}`,
	} {
		got, err := withMeta(json.RawMessage(in), own)
		if in == ` { } ` {
			// Whitespace inside an empty object: still valid JSON.
			if err != nil || !json.Valid(got) {
				t.Errorf("%q: %s %v", in, got, err)
			}
			continue
		}
		if err != nil || string(got) != want {
			t.Errorf("%q:\n got %s %v\nwant %s", in, got, err, want)
		}
	}
	for _, bad := range []string{`[1]`, `"s"`, `{"_meta":[]}`, `{"a":}`} {
		if got, err := withMeta(json.RawMessage(bad), own); err == nil {
			t.Errorf("%q accepted: %s", bad, got)
		}
	}
}
