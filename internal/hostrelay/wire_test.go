package hostrelay

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"golang.org/x/tools/txtar"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/upstream"
)

var update = flag.Bool("update", false, "rewrite testdata/wire.txtar from the encoders")

// TestEncodingMatchesTheSDK: for compact raw members, the hand-written messages are
// byte for byte what jsonrpc.EncodeMessage writes, and decodeLine reads what
// jsonrpc.DecodeMessage reads.
func TestEncodingMatchesTheSDK(t *testing.T) {
	id := func(n int64) jsonrpc.ID { i, _ := jsonrpc.MakeID(float64(n)); return i }
	params := json.RawMessage(`{"a":[1,2.50,"<&>"],"b":{"c":null}}`)
	for _, tc := range []struct {
		ours []byte
		sdk  jsonrpc.Message
	}{
		{appendRequest(nil, 7, "call", params), &jsonrpc.Request{ID: id(7), Method: "call", Params: params}},
		{appendRequest(nil, 0, "cancel", params), &jsonrpc.Request{Method: "cancel", Params: params}},
		{appendRequest(nil, 3, "snapshot", nil), &jsonrpc.Request{ID: id(3), Method: "snapshot"}},
		{appendResult(nil, 7, params), &jsonrpc.Response{ID: id(7), Result: params}},
		{appendError(nil, 9, -32000, "bad <thing> \"quoted\"\n", params), &jsonrpc.Response{ID: id(9), Error: &jsonrpc.Error{Code: -32000, Message: "bad <thing> \"quoted\"\n", Data: params}}},
	} {
		want, err := jsonrpc.EncodeMessage(tc.sdk)
		if err != nil {
			t.Fatal(err)
		}
		line := bytes.TrimSuffix(tc.ours, []byte("\n"))
		if !bytes.Equal(line, want) {
			t.Errorf("ours %s\nsdk  %s", line, want)
		}
		got, err := decodeLine(line)
		if err != nil {
			t.Fatal(err)
		}
		sdk, err := jsonrpc.DecodeMessage(line)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, sdk) {
			t.Errorf("decodeLine %#v\nDecodeMessage %#v", got, sdk)
		}
	}
}

// TestWireGolden pins every message shape of the protocol in testdata/wire.txtar
// (docs/hostrelay.md points at it). go test -run TestWireGolden -update rewrites it.
func TestWireGolden(t *testing.T) {
	at := time.Date(2026, 12, 1, 14, 32, 5, 0, time.UTC)
	st := host.Status{Name: "fx", Fingerprint: "sha256:fx", Isolation: host.IsolationShared, Enabled: true,
		State: host.StateReady, Since: at, Live: true, LastSeenAt: at, Reason: host.ReasonStarted,
		Catalog: host.CatalogStatus{Version: 3, Digest: "sha256:d", FetchedAt: at, Counts: host.Counts{Tools: 1}}, Connections: 1}
	snap := host.Snapshot{Version: 42, At: at, Servers: []host.Status{st}}
	cat := host.Catalog{Version: 3, Digest: "sha256:d", FetchedAt: at,
		Info:  host.SessionInfo{ProtocolVersion: "2025-06-18", ServerInfo: json.RawMessage(`{"name":"fx"}`), Capabilities: json.RawMessage(`{"tools":{}}`)},
		Tools: []json.RawMessage{json.RawMessage(`{"name":"echo","inputSchema":{"type":"object","properties":{"n":{"default":1.50}}}}`)}}
	pretty := json.RawMessage("{\n  \"name\": \"echo\"\n}")
	retry := at.Add(30 * time.Second)
	msgs := []struct{ name, line string }{
		{"hello", string(appendRequest(nil, 1, mHello, marshal(helloParams{Protocol: Protocol, PID: 4242, MaxMessageBytes: DefaultMaxMessageBytes})))},
		{"hello result", string(appendResult(nil, 1, marshal(helloResult{Protocol: Protocol, PID: 1717, MaxMessageBytes: DefaultMaxMessageBytes, MaxInFlight: DefaultMaxInFlight})))},
		{"hello refused", string(appendError(nil, 1, codeRelay, "hostrelay: this host speaks relay protocol 1, the client 2", marshal(wireErr{Kind: "protocol", Protocol: Protocol})))},
		{"call", string(appendRequest(nil, 2, mCall, appendCallParams(nil, "fx", "tools/call", "turn-1", true, 30*time.Second,
			[]byte(`{"name":"echo","arguments":{"text":"<hi>","n":1.50},"_meta":{"progressToken":"p1"}}`))))},
		{"call with a newline in its params", string(appendRequest(nil, 3, mCall, appendCallParams(nil, "fx", "tools/call", "", false, 0, pretty)))},
		{"progress", string(appendProgress(nil, 2, []byte(`{"progressToken":"p1","progress":1,"total":2}`)))},
		{"cancel", string(appendRequest(nil, 0, nCancel, marshal(cancelParams{ID: 2})))},
		{"call result", string(appendResult(nil, 2, appendCallResult(nil, []byte(`{"content":[{"type":"text","text":"<hi>"}],"isError":false}`))))},
		{"call result with a newline", string(appendResult(nil, 3, appendCallResult(nil, pretty)))},
		{"host error", string(appendErrorFor(nil, 2, &host.ServerError{Server: "fx", Kind: host.ErrUnavailable, State: host.StateFailed, Reason: host.ReasonCrashLoop, RetryAt: retry, Err: errors.New("exit status 3")}))},
		{"upstream error", string(appendErrorFor(nil, 2, &upstream.RPCError{Code: -32602, Message: "bad arguments", Data: json.RawMessage(`{"field":"n"}`)}))},
		{"busy", string(appendRelayError(nil, 4, "busy", "hostrelay: more than 128 requests in flight"))},
		{"too large", string(appendErrorFor(nil, 4, &MessageTooLargeError{Size: 40 << 20, Limit: 32 << 20}))},
		{"catalog", string(appendRequest(nil, 5, mCatalog, marshal(nameParams{Name: "fx"})))},
		{"catalog result", string(appendResult(nil, 5, appendCatalogResult(nil, true, &cat, nil)))},
		{"refresh_catalog result with an error", string(appendResult(nil, 6, appendCatalogResult(nil, false, &cat, &host.ServerError{Server: "fx", Kind: host.ErrStopped})))},
		{"status", string(appendRequest(nil, 7, mStatus, marshal(nameParams{Name: "fx"})))},
		{"status result", string(appendResult(nil, 7, marshal(statusResult{Found: true, Status: &st})))},
		{"snapshot", string(appendRequest(nil, 8, mSnapshot, []byte("{}")))},
		{"snapshot result", string(appendResult(nil, 8, marshal(snap)))},
		{"restart", string(appendRequest(nil, 9, mRestart, marshal(nameParams{Name: "fx"})))},
		{"end_session", string(appendRequest(nil, 10, mEndSession, marshal(keyParams{Key: "turn-1"})))},
		{"reload", string(appendRequest(nil, 11, mReload, []byte("{}")))},
		{"watch", string(appendRequest(nil, 12, mWatch, []byte("{}")))},
		{"empty result", string(appendResult(nil, 12, []byte("{}")))},
		{"resync", string(appendRequest(nil, 0, nResync, marshal(resyncParams{Snapshot: snap})))},
		{"event: server", string(eventLine(host.ServerEvent{Seq: 43, At: at, Server: "fx", Change: host.ChangePolicy}))},
		{"event: state", string(eventLine(host.StateEvent{Seq: 44, At: at, Server: "fx", From: host.StateReady, To: host.StateRestarting, Reason: host.ReasonCrashed, Error: "exit status 3"}))},
		{"event: catalog", string(eventLine(host.CatalogEvent{Seq: 45, At: at, Server: "fx", Version: 4, Counts: host.Counts{Tools: 2}}))},
	}
	var ar txtar.Archive
	ar.Comment = []byte("Every message shape of the relay protocol (docs/hostrelay.md), one line each.\n" +
		"Generated by TestWireGolden from the encoders; go test -run TestWireGolden -update rewrites it.\n")
	for _, m := range msgs {
		if !strings.HasSuffix(m.line, "\n") || strings.Count(m.line, "\n") != 1 {
			t.Errorf("%s: not one line: %q", m.name, m.line)
		}
		if _, err := decodeLine([]byte(strings.TrimSuffix(m.line, "\n"))); err != nil {
			t.Errorf("%s does not decode: %v", m.name, err)
		}
		ar.Files = append(ar.Files, txtar.File{Name: m.name, Data: []byte(m.line)})
	}
	path := filepath.Join("testdata", "wire.txtar")
	got := txtar.Format(&ar)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the wire format changed; if on purpose, bump Protocol if old peers cannot read it, and run -update:\n%s", diffLines(string(want), string(got)))
	}
}

func diffLines(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out strings.Builder
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			fmt.Fprintf(&out, "- %s\n+ %s\n", x, y)
		}
	}
	return out.String()
}
