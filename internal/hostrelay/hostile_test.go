package hostrelay

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/host/hosttest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestHostileInput sends what a broken or hostile client might: each line is answered
// with an error (or ignored, or the connection dropped) and the host keeps serving
// every other client.
func TestHostileInput(t *testing.T) {
	d := hosttest.NewDialer()
	echoParams(d, "echo")
	hosting, relaying, _ := pair(t, d, def("echo"))
	ctx := testCtx(t)
	for _, tc := range []struct {
		name    string
		noHello bool
		lines   []string
		want    string // in the answer to the last line; "" expects no answer
	}{
		{"not json", false, []string{"this is not json"}, `"id":null,"error":{"code":-32700`},
		{"a batch", false, []string{`[{"jsonrpc":"2.0","id":5,"method":"snapshot"}]`}, `"code":-32700`},
		{"NUL bytes", false, []string{"\x00\x00{}"}, `"code":-32700`},
		{"deep nesting", false, []string{`{"jsonrpc":"2.0","id":5,"method":"snapshot","params":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`}, `"code":-32700`},
		{"trailing data", false, []string{`{"jsonrpc":"2.0","id":5,"method":"snapshot"} {"jsonrpc":"2.0","id":6,"method":"snapshot"}`}, `"code":-32700`},
		{"a fractional id", false, []string{`{"jsonrpc":"2.0","id":1.5,"method":"snapshot"}`}, `"code":-32700`},
		{"a huge id", false, []string{`{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"snapshot"}`}, `"code":-32700`},
		{"wrong version tag", false, []string{`{"jsonrpc":"1.0","id":5,"method":"snapshot"}`}, `"code":-32700`},
		{"before hello", true, []string{`{"jsonrpc":"2.0","id":5,"method":"snapshot"}`}, `"kind":"protocol"`},
		{"other protocol", true, []string{`{"jsonrpc":"2.0","id":5,"method":"hello","params":{"protocol":99,"pid":1,"max_message_bytes":100}}`}, `"kind":"protocol","protocol":1`},
		{"hello of the wrong shape", true, []string{`{"jsonrpc":"2.0","id":5,"method":"hello","params":{"protocol":"one"}}`}, `"kind":"invalid"`},
		{"hello from a later release", true, []string{`{"jsonrpc":"2.0","id":5,"method":"hello","params":{"protocol":2,"pid":1,"max_message_bytes":100,"features":["x"]}}`}, `"kind":"protocol","protocol":1`},
		{"string id", false, []string{`{"jsonrpc":"2.0","id":"x","method":"snapshot"}`}, `"id":null,"error":{"code":-32600`},
		{"zero id", false, []string{`{"jsonrpc":"2.0","id":0,"method":"snapshot"}`}, `"code":-32600`},
		{"negative id", false, []string{`{"jsonrpc":"2.0","id":-3,"method":"snapshot"}`}, `"code":-32600`},
		{"unknown method", false, []string{`{"jsonrpc":"2.0","id":5,"method":"shutdown"}`}, `"id":5,"error":{"code":-32601`},
		{"unknown member", false, []string{`{"jsonrpc":"2.0","id":5,"method":"call","params":{"server":"echo","method":"x","sudo":true}}`}, `"id":5,"error":{"code":-32000`},
		{"params of the wrong type", false, []string{`{"jsonrpc":"2.0","id":5,"method":"call","params":[1,2]}`}, `"kind":"invalid"`},
		{"b64 params that are not JSON", false, []string{`{"jsonrpc":"2.0","id":5,"method":"call","params":{"server":"echo","method":"x","params_b64":"e2E6"}}`}, `not valid JSON`},
		{"a huge session key", false, []string{`{"jsonrpc":"2.0","id":5,"method":"call","params":{"server":"echo","method":"x","session_key":"` + strings.Repeat("k", 5000) + `"}}`}, `too long`},
		{"an unknown server", false, []string{`{"jsonrpc":"2.0","id":5,"method":"call","params":{"server":"nope","method":"tools/call"}}`}, `"error_kind":"unknown_server"`},
		{"a response", false, []string{`{"jsonrpc":"2.0","id":5,"result":{}}`}, ""},
		{"a cancel for nothing", false, []string{`{"jsonrpc":"2.0","method":"cancel","params":{"id":12345}}`}, ""},
		{"a cancel with junk", false, []string{`{"jsonrpc":"2.0","method":"cancel","params":"x"}`}, ""},
		{"an unknown notification", false, []string{`{"jsonrpc":"2.0","method":"exit"}`}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, hosting)
			if !tc.noHello {
				r.hello()
			}
			for _, l := range tc.lines {
				r.send(l)
			}
			switch tc.want {
			case "":
				// Nothing comes back; the next request is answered.
				r.send(`{"jsonrpc":"2.0","id":99,"method":"snapshot"}`)
				if got := r.recv(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":99,"result":`) {
					t.Errorf("after %q the next answer is %q", tc.lines, got)
				}
			default:
				if got := r.recv(); !strings.Contains(got, tc.want) {
					t.Errorf("got %q, want %s", got, tc.want)
				}
			}
			if _, err := relaying.Call(ctx, "echo", "tools/call", []byte(`{"still":"fine"}`), host.CallOptions{}); err != nil {
				t.Errorf("another client's call after %s: %v", tc.name, err)
			}
		})
	}
}

// TestOversizedMessages: a line over the host's cap drops that client (without being
// buffered whole); an answer over the client's cap becomes an error; a request over
// the host's cap fails before it is sent.
func TestOversizedMessages(t *testing.T) {
	d := hosttest.NewDialer()
	echoParams(d, "echo")
	dir := testenv.PrivateDir(t)
	const limit = 1 << 20
	hosting := open(t, dir, Options{NewHost: fakeHost(d, def("echo")), Limits: Limits{MaxMessageBytes: limit}})
	r := dialRaw(t, hosting)
	r.hello()
	// The host stops reading at the cap: the rest of the write may fail.
	r.nc.Write([]byte(`{"jsonrpc":"2.0","id":5,"method":"snapshot","params":"` + strings.Repeat("x", 2*limit) + "\"}\n"))
	if got := r.recv(); got != "" {
		t.Errorf("after an oversized line: %q, want the connection dropped", got)
	}
	if st := hosting.Stats(); st.DroppedClients != 1 {
		t.Errorf("DroppedClients = %d, want 1", st.DroppedClients)
	}

	// The client's own cap is smaller than the host's: the host answers an error
	// instead of a result it cannot take.
	small := open(t, dir, Options{NewHost: fakeHost(d), Limits: Limits{MaxMessageBytes: 64 << 10}})
	ctx := testCtx(t)
	big := []byte(`{"x":"` + strings.Repeat("y", 40<<10) + `"}`)
	// 40 KiB of params fit; the echoed result plus its envelope still fits…
	if _, err := small.Call(ctx, "echo", "tools/call", big, host.CallOptions{}); err != nil {
		t.Errorf("a 40 KiB call: %v", err)
	}
	// …but 70 KiB does not leave this process, and comes back as a typed error.
	var tl *MessageTooLargeError
	huge := []byte(`{"x":"` + strings.Repeat("y", 70<<10) + `"}`)
	if _, err := small.Call(ctx, "echo", "tools/call", huge, host.CallOptions{}); !errors.As(err, &tl) || tl.Limit != 64<<10 {
		t.Errorf("a 70 KiB call from a client capped at 64 KiB: %v", err)
	}
	// A host answer over the client's cap: the request fits, the answer does not.
	d.Server("echo").Set(func(b *hosttest.Behavior) {
		b.Handler = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`"` + strings.Repeat("z", 100<<10) + `"`), nil
		}
	})
	if _, err := small.Call(ctx, "echo", "tools/call", nil, host.CallOptions{}); !errors.As(err, &tl) || tl.Limit != 64<<10 {
		t.Errorf("a 100 KiB answer to a client capped at 64 KiB: %v", err)
	}
	if _, err := small.Snapshot(ctx); err != nil {
		t.Errorf("the connection did not survive: %v", err)
	}
}

// TestDuplicateIDRefused: an id still in flight cannot be reused.
func TestDuplicateIDRefused(t *testing.T) {
	d := hosttest.NewDialer()
	d.Server("hang").Set(func(b *hosttest.Behavior) { b.CallHang = true })
	hosting, _, _ := pair(t, d, def("hang"))
	r := dialRaw(t, hosting)
	r.hello()
	call := `{"jsonrpc":"2.0","id":7,"method":"call","params":{"server":"hang","method":"tools/call"}}`
	r.send(call)
	r.send(call)
	if got := r.recv(); !strings.Contains(got, `"id":7,"error"`) || !strings.Contains(got, "already in use") {
		t.Fatalf("second use of id 7: %q", got)
	}
	r.send(`{"jsonrpc":"2.0","method":"cancel","params":{"id":7}}`)
	if got := r.recv(); !strings.Contains(got, `"id":7,"error"`) || !strings.Contains(got, `"kind":"cancelled"`) {
		t.Fatalf("the cancelled call: %q", got)
	}
}
