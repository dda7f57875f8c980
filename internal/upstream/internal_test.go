package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
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
	if want := `{"_meta":{"other":1e2,"progressToken":17},"arguments":{"n":1.50,"s":"<&>"},"name":"x"}`; string(out) != want {
		t.Errorf("rewritten %s, want %s", out, want)
	}
	for _, p := range []string{`{"name":"x"}`, `{"_meta":{}}`, `{"_meta":"progressToken"}`, `not json "progressToken"`} {
		if out, _, ok := rewriteProgressToken(json.RawMessage(p), 1); ok || string(out) != p {
			t.Errorf("%s rewritten to %s", p, out)
		}
	}
	if id, ok := progressID(json.RawMessage(`{"progressToken":"17"}`)); !ok || id != 17 {
		t.Errorf("string token: %d %v", id, ok)
	}
}
