package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/store/storetest"
	"github.com/toolgate/toolgate/internal/testenv"
)

const holdInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
const holdCall = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"local.hold","arguments":{}}}`

// holdTool registers local.hold for the test: it runs until its context ends.
func holdTool(t *testing.T) <-chan struct{} {
	started := make(chan struct{})
	bridgeTestTools = []*kernel.Tool{{
		ID: "local.hold", InputSchema: json.RawMessage(`{"type":"object"}`),
		Run: func(ctx context.Context, _ *kernel.Call) (*kernel.Output, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		},
	}}
	t.Cleanup(func() { bridgeTestTools = nil })
	return started
}

// holdOutcomes returns local.hold's audit events as decision:code.
func holdOutcomes(t *testing.T, data string) string {
	var got []string
	for _, e := range storetest.Trail(t, data) {
		if e.Tool == "local.hold" {
			got = append(got, string(e.Decision)+":"+e.Code)
		}
	}
	return strings.Join(got, " ")
}

// TestBridgeInterruptRecordsShutdown: an interrupt (the context Main cancels on
// SIGINT or SIGTERM) ends `toolgate bridge` through the app's shutdown, over
// HTTP and over stdio: the kernel cancels the call in flight and records it
// failed cancelled_by_shutdown, its answer still reaches the client, and the
// command returns 0. Before, the bridge's sessions (HTTP) or the server's
// context (stdio) cut the call first, and it was recorded cancelled, as if its
// client had gone away.
func TestBridgeInterruptRecordsShutdown(t *testing.T) {
	t.Run("http", func(t *testing.T) {
		started := holdTool(t)
		data := testenv.PrivateDir(t)
		out := newWaitWriter()
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		done := make(chan error, 1)
		code := make(chan int, 1)
		go func() {
			c := Run(ctx, []string{"--data-dir", data, "bridge", "--no-auth"}, Stdio{In: strings.NewReader(""), Out: out, Err: io.Discard})
			code <- c
			done <- nil
		}()
		url := out.wait(t, regexp.MustCompile(`(http://\S+)\n`), done)
		post := func(session, body string) (*http.Response, error) {
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if session != "" {
				req.Header.Set("Mcp-Session-Id", session)
			}
			return http.DefaultClient.Do(req)
		}
		res, err := post("", holdInit)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		session := res.Header.Get("Mcp-Session-Id")
		answered := make(chan string, 1)
		go func() {
			res, err := post(session, holdCall)
			if err != nil {
				answered <- err.Error()
				return
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			answered <- string(b)
		}()
		<-started
		stop() // what SIGINT and SIGTERM do in Main
		if a := <-answered; !strings.Contains(a, "cancelled_by_shutdown") {
			t.Errorf("the call's answer: %s", a)
		}
		if c := <-code; c != 0 {
			t.Errorf("exit %d", c)
		}
		if got := holdOutcomes(t, data); got != "allowed: failed:cancelled_by_shutdown" {
			t.Errorf("local.hold events %q, want allowed then failed:cancelled_by_shutdown", got)
		}
	})
	t.Run("stdio", func(t *testing.T) {
		started := holdTool(t)
		data := testenv.PrivateDir(t)
		in, feed := io.Pipe()
		defer feed.Close()
		out := newWaitWriter()
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		code := make(chan int, 1)
		go func() {
			code <- Run(ctx, []string{"--data-dir", data, "bridge", "--stdio"}, Stdio{In: in, Out: out, Err: io.Discard})
		}()
		go func() {
			_, _ = io.WriteString(feed, holdInit+"\n"+`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+holdCall+"\n")
		}()
		<-started
		stop()
		if c := <-code; c != 0 {
			t.Errorf("exit %d", c)
		}
		if !strings.Contains(out.String(), `"id":2`) || !strings.Contains(out.String(), "cancelled_by_shutdown") {
			t.Errorf("the call's answer is not on stdout:\n%s", out.String())
		}
		if got := holdOutcomes(t, data); got != "allowed: failed:cancelled_by_shutdown" {
			t.Errorf("local.hold events %q, want allowed then failed:cancelled_by_shutdown", got)
		}
	})
}
