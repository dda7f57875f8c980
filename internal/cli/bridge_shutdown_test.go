package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/store/storetest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// holdTool is a tool that runs until its call is cancelled; started is closed when it
// starts.
func holdTool(started chan struct{}) *kernel.Tool {
	return &kernel.Tool{
		ID: "local.hold", InputSchema: json.RawMessage(`{"type":"object"}`),
		Run: func(ctx context.Context, _ *kernel.Call) (*kernel.Output, error) {
			close(started)
			<-ctx.Done()
			return nil, context.Cause(ctx)
		},
	}
}

// outcomeOf is the code of the outcome event of local.hold's one call.
func outcomeOf(t *testing.T, data string) []string {
	t.Helper()
	var got []string
	for _, e := range storetest.Trail(t, data) {
		if e.Tool == "local.hold" {
			got = append(got, string(e.Decision)+":"+e.Code)
		}
	}
	return got
}

// TestBridgeSIGTERMRecordsShutdown: a SIGTERM (the command's context ending) while a
// call runs on a bridge goes through the same App shutdown as toolgate serve: the
// kernel cancels the call and records it cancelled_by_shutdown before the bridge
// closes. Before, the bridge closed first, which cancelled the call as its session's
// and recorded it cancelled, as if its caller had gone.
func TestBridgeSIGTERMRecordsShutdown(t *testing.T) {
	for _, stdio := range []bool{false, true} {
		name := "http"
		if stdio {
			name = "stdio"
		}
		t.Run(name, func(t *testing.T) {
			started := make(chan struct{})
			testTools = []*kernel.Tool{holdTool(started)}
			t.Cleanup(func() { testTools = nil })
			data := testenv.PrivateDir(t)
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			out := newWaitWriter()
			inR, inW := io.Pipe()
			defer inW.Close()
			args := []string{"--data-dir", data, "bridge"}
			if stdio {
				args = append(args, "--stdio")
			}
			done := make(chan error, 1)
			go func() {
				code := Run(ctx, args, Stdio{In: inR, Out: out, Err: io.Discard})
				if code != 0 {
					done <- &ExitError{Code: code}
				}
				close(done)
			}()
			initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}`
			callHold := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"local.hold"}}`
			if stdio {
				go io.WriteString(inW, initialize+"\n"+callHold+"\n")
			} else {
				out.wait(t, regexp.MustCompile(`^http://\S+\n\S+\n`), done) // the URL, then the token
				lines := strings.Fields(out.String())
				url, token := lines[0], lines[1]
				post := func(body string) {
					req, _ := http.NewRequest("POST", url, strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Authorization", "Bearer "+token)
					if resp, err := http.DefaultClient.Do(req); err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				}
				post(initialize)
				go post(callHold)
			}
			select {
			case <-started:
			case <-time.After(10 * time.Second):
				t.Fatalf("the call did not start:\n%s", out.String())
			}
			stop() // what SIGTERM does in main
			if err := <-done; err != nil {
				t.Fatalf("bridge: %v", err)
			}
			if got := strings.Join(outcomeOf(t, data), " "); got != "allowed: failed:cancelled_by_shutdown" {
				t.Errorf("local.hold events %q, want allowed then failed:cancelled_by_shutdown", got)
			}
			if err := audit.Verify(storetest.Trail(t, data)); err != nil {
				t.Error(err)
			}
		})
	}
}
