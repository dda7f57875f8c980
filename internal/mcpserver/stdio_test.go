package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mcpserver/mcpservertest"
	"github.com/toolgate/toolgate/internal/mcpspec"
)

// stdioInit opens a stdio session (its answer has id 0).
const stdioInit = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`

// pipeStdio serves turn over pipes: the caller writes to in, reads from out,
// and closes in to end it; done receives what ServeStdio returned.
func pipeStdio(turn mcpserver.Turn, opts mcpserver.StdioOptions) (in *io.PipeWriter, out *io.PipeReader, done <-chan error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	d := make(chan error, 1)
	go func() {
		d <- mcpserver.ServeStdio(context.Background(), inR, outW, turn, opts)
		outW.Close()
	}()
	return inW, outR, d
}

// runStdio feeds input to ServeStdio and returns the lines written.
func runStdio(t *testing.T, input string, opts mcpserver.StdioOptions) []string {
	t.Helper()
	var out bytes.Buffer
	turn := mcpservertest.NewTurn()
	turn.Release()
	if err := mcpserver.ServeStdio(context.Background(), strings.NewReader(input), &out, turn, opts); err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
	s := strings.TrimSuffix(out.String(), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func TestStdioAnswers(t *testing.T) {
	input := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		``,
		`   `,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`not json`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"test.echo","Name":"test.fail"}}`,
		`[{"jsonrpc":"2.0","id":4,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":5,"method":"nope"}]`,
		`[]`,
		`[{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"test.elicit"}}`,
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"test.panic"}}`,
		`{"jsonrpc":"2.0","id":9,"method":"ping"}`, // last line without a newline
	}, "\n")
	lines := runStdio(t, input, mcpserver.StdioOptions{ServerInfo: mcpspec.Implementation{Name: "toolgate", Version: "t"}})
	want := []string{
		`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-03-26","capabilities":{"tools":{"listChanged":false}},"serverInfo":{"name":"toolgate","version":"t"}}}`,
		`"id":2,"result":{"tools":[`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700`,
		`{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"invalid request: members \"name\" and \"Name\" differ only in case"}}`,
		`[{"jsonrpc":"2.0","id":4,"result":{}},{"jsonrpc":"2.0","id":5,"error":{"code":-32601`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: empty batch"}}`,
		`{"jsonrpc":"2.0","id":6,"error":{"code":-32602`,
		`"id":7,"result":{"content":[{"text":"{\"code\":\"tool_failed\",\"message\":\"mcpserver: the client cannot receive requests`,
		`{"jsonrpc":"2.0","id":8,"error":{"code":-32603,"message":"internal error"}}`,
		`{"jsonrpc":"2.0","id":9,"result":{}}`,
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}
	for i := range want {
		if !strings.Contains(lines[i], want[i]) {
			t.Errorf("line %d:\n got %s\nwant …%s…", i, lines[i], want[i])
		}
		if !json.Valid([]byte(lines[i])) {
			t.Errorf("line %d is not JSON: %s", i, lines[i])
		}
	}
}

// TestStdioArrivalOrder: a slow call is answered before fast calls that arrived
// after it, although they run concurrently.
func TestStdioArrivalOrder(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	turn := mcpservertest.NewTurn()
	done := make(chan error, 1)
	go func() {
		done <- mcpserver.ServeStdio(context.Background(), inR, outW, turn, mcpserver.StdioOptions{})
		outW.Close()
	}()
	write := func(s string) {
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	write(stdioInit)
	write(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test.block"}}`)
	if got := <-turn.Started(); got != mcpservertest.ToolBlock {
		t.Fatalf("started %q", got)
	}
	for i := 2; i <= 5; i++ {
		write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"test.echo","arguments":{"i":%d}}}`, i, i))
	}
	// The four echo calls run while the blocked call holds the first slot.
	for range 4 {
		<-turn.Started()
	}
	turn.Release()
	inW.Close()
	sc := bufio.NewScanner(outR)
	var ids []int
	for sc.Scan() {
		var m struct{ ID int }
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ids) != "[0 1 2 3 4 5]" {
		t.Errorf("answer order %v", ids)
	}
}

func TestStdioTooLongLine(t *testing.T) {
	long := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 300_000) + `"}}`
	input := long + "\n" + `{"jsonrpc":"2.0","id":2,"method":"ping"}` + "\n"
	lines := runStdio(t, input, mcpserver.StdioOptions{MaxMessageBytes: 1000})
	if len(lines) != 2 {
		t.Fatalf("got %d lines: %v", len(lines), lines)
	}
	if !strings.Contains(lines[0], `"id":null,"error":{"code":-32700,"message":"parse error: message is larger than 1000 bytes"}`) {
		t.Errorf("line 0: %s", lines[0])
	}
	if lines[1] != `{"jsonrpc":"2.0","id":2,"result":{}}` {
		t.Errorf("line 1: %s", lines[1])
	}
	// A line of exactly the cap (plus its newline, with or without a CR) is served.
	exact := `{"jsonrpc":"2.0","id":3,"method":"ping","params":{"p":"` + strings.Repeat("y", 1000-58) + `"}}`
	if len(exact) != 1000 {
		t.Fatalf("exact line is %d bytes", len(exact))
	}
	lines = runStdio(t, exact+"\r\n"+exact+"\n", mcpserver.StdioOptions{MaxMessageBytes: 1000})
	if len(lines) != 2 || lines[0] != `{"jsonrpc":"2.0","id":3,"result":{}}` || lines[1] != lines[0] {
		t.Errorf("line at the cap: %v", lines)
	}
	// The same cap at end of input without a newline.
	lines = runStdio(t, long, mcpserver.StdioOptions{MaxMessageBytes: 1000})
	if len(lines) != 1 || !strings.Contains(lines[0], "-32700") {
		t.Errorf("unterminated long line: %v", lines)
	}
}

// TestStdioCancel: cancelling the context cancels calls in flight and returns.
func TestStdioCancel(t *testing.T) {
	inR, inW := io.Pipe()
	defer inW.Close()
	var out safeBuffer
	turn := mcpservertest.NewTurn()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mcpserver.ServeStdio(ctx, inR, &out, turn, mcpserver.StdioOptions{}) }()
	io.WriteString(inW, stdioInit+"\n"+`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test.block"}}`+"\n")
	<-turn.Started()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("ServeStdio returned %v", err)
	}
	if !strings.Contains(out.String(), `"id":1`) {
		t.Errorf("the cancelled call was not answered: %q", out.String())
	}
}

// TestStdioCancelledNotification: notifications/cancelled cancels one call.
func TestStdioCancelledNotification(t *testing.T) {
	input := stdioInit + "\n" + `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"test.block"}}` + "\n"
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	turn := mcpservertest.NewTurn()
	done := make(chan error, 1)
	go func() {
		done <- mcpserver.ServeStdio(context.Background(), inR, outW, turn, mcpserver.StdioOptions{})
		outW.Close()
	}()
	io.WriteString(inW, input)
	<-turn.Started()
	io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}`+"\n")
	br := bufio.NewReader(outR)
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, `"id":0,"result"`) {
		t.Fatalf("initialize: %q %v", line, err)
	}
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(line, `"id":"a"`) || !strings.Contains(line, `cancelled`) {
		t.Errorf("answer %s", line)
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// TestStdioWriteError: a closed stdout ends ServeStdio with an error.
func TestStdioWriteError(t *testing.T) {
	err := mcpserver.ServeStdio(context.Background(), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n"),
		failWriter{}, mcpservertest.NewTurn(), mcpserver.StdioOptions{})
	if err == nil || !strings.Contains(err.Error(), "writing to the client") {
		t.Errorf("got %v", err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

type safeBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestStdioStateless: by default stdio serves server/discover and
// 2026-07-28 requests next to an initialized session, refuses them in batches,
// and needs no handshake.
func TestStdioStateless(t *testing.T) {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	input := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + meta + `}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test.echo","arguments":{"x":1},` + meta + `}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2030-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		`[{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{` + meta + `}}]`,
		`{"jsonrpc":"2.0","id":5,"method":"ping"}`,
	}, "\n")
	lines := runStdio(t, input, mcpserver.StdioOptions{})
	want := []string{
		`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2026-07-28","2025-11-25"`,
		`{"jsonrpc":"2.0","id":2,"result":{"resultType":"complete","content":[`,
		`{"jsonrpc":"2.0","id":3,"error":{"code":-32022,`,
		`[{"jsonrpc":"2.0","id":4,"error":{"code":-32600,"message":"invalid request: 2026-07-28 requests cannot be batched"}}]`,
		`{"jsonrpc":"2.0","id":5,"result":{}}`,
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("line %d:\n got %s\nwant %s…", i, lines[i], want[i])
		}
	}
	// With NoStateless, server/discover is an unknown method.
	lines = runStdio(t, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta+`}}`, mcpserver.StdioOptions{NoStateless: true})
	if len(lines) != 1 || !strings.Contains(lines[0], `"code":-32601`) {
		t.Errorf("server/discover with NoStateless: %v", lines)
	}
}
