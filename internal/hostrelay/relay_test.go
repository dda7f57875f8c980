package hostrelay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/host/hosttest"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest/fixturedata"
)

// awkward is JSON that any decode-and-encode on the way would change: spacing and
// newlines between tokens, numbers as written, escapes, HTML characters, bytes that
// are not UTF-8, unknown members, deep nesting.
var awkward = []string{
	`{"name":"awkward","arguments":{"n":1.50,"e":1e2,"big":12345678901234567890,"neg":-0.0}}`,
	"{\n  \"a\" : [ 1 , 2 ],\n\t\"b\":null }\n",
	"\r\n{\"crlf\":\r\n true}\r\n",
	`{"html":"<b>&amp;</b>","esc":"\u003c\u00e9\ud83d\ude00\"\\\/","uni":"é😀"}`,
	"{\"notutf8\":\"\xff\xfe\xc3\"}",
	`  "just a string"  `,
	`[1,2,3]`,
	`null`,
	`{"deep":[[[[[[[[[[[[[[[[{}]]]]]]]]]]]]]]]]}`,
	fixturedata.AwkwardTool,
	fixturedata.AwkwardResult,
	`{"_meta":{"progressToken":1.50},"x-unknown":{"keep":"me"}}`,
}

func TestCallBytesExact(t *testing.T) {
	d := hosttest.NewDialer()
	echoParams(d, "echo")
	hosting, relaying, _ := pair(t, d, def("echo"))
	ctx := testCtx(t)
	for i, in := range awkward {
		if !json.Valid([]byte(in)) {
			t.Fatalf("case %d is not valid JSON", i)
		}
		for _, n := range []*Node{hosting, relaying} {
			got, err := n.Call(ctx, "echo", "tools/call", json.RawMessage(in), host.CallOptions{})
			if err != nil {
				t.Fatalf("case %d (hosting %v): %v", i, n.Stats().Hosting, err)
			}
			if !bytes.Equal(got, []byte(in)) {
				t.Errorf("case %d (hosting %v): sent %q, got back %q", i, n.Stats().Hosting, in, got)
			}
		}
	}
	// No params: none reach the upstream, and a nil result comes back nil.
	got, err := relaying.Call(ctx, "echo", "tools/call", nil, host.CallOptions{})
	if err != nil || got != nil {
		t.Errorf("nil params: %q, %v", got, err)
	}
	// Params that are not JSON are refused before they are sent.
	if _, err := relaying.Call(ctx, "echo", "tools/call", json.RawMessage(`{"a":`), host.CallOptions{}); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("invalid params: %v", err)
	}
	if _, err := relaying.Call(ctx, "echo", "tools/call", json.RawMessage(`{}`), host.CallOptions{}); err != nil {
		t.Errorf("the connection did not survive the refused call: %v", err)
	}
}

func TestErrorsKeepTheirTypes(t *testing.T) {
	d := hosttest.NewDialer()
	rpcErr := &upstream.RPCError{Code: -32602, Message: "bad <arguments>", Data: json.RawMessage("{\"why\" : 1.50,\n\"x\":\"\xff\"}")}
	d.Server("rpc").Set(func(b *hosttest.Behavior) {
		b.Handler = func(context.Context, string, json.RawMessage) (json.RawMessage, error) { return nil, rpcErr }
	})
	d.Server("boom").Set(func(b *hosttest.Behavior) {
		b.Handler = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
			return nil, errors.New("boom: something local to the host")
		}
	})
	d.Server("nostart").Set(func(b *hosttest.Behavior) { b.DialErr = errors.New("exec: no such file") })
	off := def("off")
	off.Disabled = true
	hosting, relaying, _ := pair(t, d, def("rpc"), def("boom"), off, def("nostart"))
	ctx := testCtx(t)
	for _, server := range []string{"rpc", "boom", "off", "missing", "nostart"} {
		_, local := hosting.Call(ctx, server, "tools/call", json.RawMessage(`{}`), host.CallOptions{})
		_, relayed := relaying.Call(ctx, server, "tools/call", json.RawMessage(`{}`), host.CallOptions{})
		if local == nil || relayed == nil {
			t.Fatalf("%s: local %v, relayed %v", server, local, relayed)
		}
		if server == "nostart" { // two starts that failed at two times: two retry times
			if !errors.Is(relayed, host.ErrStartFailed) || !strings.Contains(relayed.Error(), "exec: no such file") {
				t.Errorf("nostart: relayed %v", relayed)
			}
			continue
		}
		if local.Error() != relayed.Error() {
			t.Errorf("%s: local error %q, relayed %q", server, local, relayed)
		}
		var ls, rs *host.ServerError
		if errors.As(local, &ls) != errors.As(relayed, &rs) {
			t.Fatalf("%s: local %T, relayed %T", server, local, relayed)
		}
		if ls != nil {
			if ls.Kind != rs.Kind || ls.Server != rs.Server || ls.State != rs.State || ls.Reason != rs.Reason || !ls.RetryAt.Equal(rs.RetryAt) {
				t.Errorf("%s: local %+v, relayed %+v", server, ls, rs)
			}
			if !errors.Is(relayed, ls.Kind) {
				t.Errorf("%s: errors.Is(relayed, %v) is false", server, ls.Kind)
			}
		}
	}
	_, err := relaying.Call(ctx, "rpc", "tools/call", json.RawMessage(`{}`), host.CallOptions{})
	var re *upstream.RPCError
	if !errors.As(err, &re) || re.Code != rpcErr.Code || re.Message != rpcErr.Message || !bytes.Equal(re.Data, rpcErr.Data) {
		t.Errorf("relayed RPC error %#v, want %#v", err, rpcErr)
	}
	_, err = relaying.Call(ctx, "off", "tools/call", nil, host.CallOptions{})
	if !errors.Is(err, host.ErrDisabled) {
		t.Errorf("disabled server: %v", err)
	}
	var remote *RemoteError
	if _, err = relaying.Call(ctx, "boom", "tools/call", nil, host.CallOptions{}); !errors.As(err, &remote) {
		t.Errorf("an error of no known type: %T %v", err, err)
	}
}

func TestWireErrorsRoundTrip(t *testing.T) {
	retry := time.Date(2026, 12, 1, 14, 32, 5, 123456789, time.UTC)
	c := &client{hostPID: 42}
	roundTrip := func(in error) error {
		line := appendErrorFor(nil, 7, in)
		msg, err := decodeLine(bytes.TrimSuffix(line, []byte("\n")))
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		_, out := c.answer(msg.(*jsonrpc.Response))
		return out
	}
	for _, k := range serverKinds {
		in := &host.ServerError{Server: "s", Kind: k.err, State: host.StateFailed, Reason: host.ReasonCrashLoop, RetryAt: retry, Err: errors.New("exit status 3")}
		out := roundTrip(in)
		var se *host.ServerError
		if !errors.As(out, &se) || se.Kind != k.err || se.Server != "s" || se.State != in.State || se.Reason != in.Reason || !se.RetryAt.Equal(retry) || se.Err.Error() != "exit status 3" {
			t.Errorf("%s: %#v became %#v", k.name, in, out)
		}
		if out.Error() != in.Error() {
			t.Errorf("%s: message %q became %q", k.name, in, out)
		}
	}
	if out := roundTrip(&MessageTooLargeError{Size: 9, Limit: 8}); !reflect.DeepEqual(out, &MessageTooLargeError{Size: 9, Limit: 8}) {
		t.Errorf("too large: %#v", out)
	}
	if out := roundTrip(fmt.Errorf("wrapped: %w", context.Canceled)); out.Error() != "wrapped: context canceled" {
		t.Errorf("cancelled: %#v", out)
	}
}

// TestServerKindsCoverHost keeps serverKinds complete: every error kind internal/host
// declares has a name on the wire.
func TestServerKindsCoverHost(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "internal/host/errors.go"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, sp := range g.Specs {
			for _, name := range sp.(*ast.ValueSpec).Names {
				if strings.HasPrefix(name.Name, "Err") {
					declared = append(declared, name.Name)
				}
			}
		}
	}
	if len(declared) != len(serverKinds) {
		t.Errorf("internal/host declares %d error kinds %v; serverKinds names %d", len(declared), declared, len(serverKinds))
	}
}

func TestCatalogBytesExact(t *testing.T) {
	d := hosttest.NewDialer()
	tools := []json.RawMessage{
		json.RawMessage(fixturedata.AwkwardTool),
		json.RawMessage("{\n  \"name\" : \"pretty\",\n  \"inputSchema\": {\"type\":\"object\"}\n}"),
		json.RawMessage("{\"name\":\"bytes\",\"description\":\"\xff<&>\"}"),
	}
	d.Server("cat").Set(func(b *hosttest.Behavior) {
		b.Info = host.SessionInfo{
			ProtocolVersion: "2025-06-18",
			ServerInfo:      json.RawMessage(fixturedata.ServerInfo),
			Capabilities:    json.RawMessage(fixturedata.Capabilities),
			Instructions:    "use <these> tools\nwisely",
		}
		b.Tools = tools
		b.Prompts = []json.RawMessage{json.RawMessage(`{"name":"p","x":1.50}`)}
	})
	hosting, relaying, _ := pair(t, d, def("cat"))
	ctx := testCtx(t)
	if _, ok, err := relaying.Catalog(ctx, "cat"); ok || err != nil {
		t.Fatalf("catalogue before any fetch: ok %v, %v", ok, err)
	}
	refreshed, err := relaying.RefreshCatalog(ctx, "cat")
	if err != nil {
		t.Fatal(err)
	}
	local, ok, _ := hosting.Catalog(ctx, "cat")
	if !ok {
		t.Fatal("no catalogue on the host")
	}
	relayed, ok, err := relaying.Catalog(ctx, "cat")
	if !ok || err != nil {
		t.Fatalf("relayed catalogue: ok %v, %v", ok, err)
	}
	for _, c := range []host.Catalog{refreshed, relayed} {
		if !catalogsEqual(local, c) {
			t.Errorf("relayed catalogue differs:\nlocal   %+v\nrelayed %+v", local, c)
		}
	}
	for i, want := range tools {
		if !bytes.Equal(relayed.Tools[i], want) {
			t.Errorf("tool %d: %q, want %q", i, relayed.Tools[i], want)
		}
	}
	if _, err := relaying.RefreshCatalog(ctx, "missing"); !errors.Is(err, host.ErrUnknownServer) {
		t.Errorf("refreshing an unknown server: %v", err)
	}
}

// catalogsEqual compares every field, raw bytes exactly and times as instants.
func catalogsEqual(a, b host.Catalog) bool {
	if !a.FetchedAt.Equal(b.FetchedAt) {
		return false
	}
	a.FetchedAt, b.FetchedAt = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

// TestCatalogEncodingCoversEveryField fills every field of host.Catalog and checks the
// hand-written encoding carries each one (a field added to host.Catalog fails here
// until appendCatalog writes it).
func TestCatalogEncodingCoversEveryField(t *testing.T) {
	var c host.Catalog
	fill(t, reflect.ValueOf(&c).Elem())
	var got host.Catalog
	if err := json.Unmarshal(appendCatalog(nil, &c), &got); err != nil {
		t.Fatal(err)
	}
	if !catalogsEqual(c, got) {
		t.Errorf("appendCatalog lost a field:\nin  %+v\nout %+v", c, got)
	}
	// And it is what encoding/json makes of it, but for the raw bytes' spacing (which
	// encoding/json compacts).
	std, _ := json.Marshal(c)
	again, _ := json.Marshal(got)
	if !bytes.Equal(std, again) {
		t.Errorf("appendCatalog and encoding/json disagree:\n%s\n%s", std, again)
	}
}

// fill sets every field of v to a non-zero value.
func fill(t *testing.T, v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Date(2026, 12, 1, 14, 32, 5, 7, time.UTC)))
			return
		}
		for i := range v.NumField() {
			fill(t, v.Field(i))
		}
	case reflect.String:
		v.SetString("v<&>\u00e9")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Uint64:
		if v.CanInt() {
			v.SetInt(7)
		} else {
			v.SetUint(7)
		}
	case reflect.Slice:
		if v.Type() == reflect.TypeOf(json.RawMessage{}) {
			v.SetBytes([]byte(`{"k" : 1.50}`))
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(t, s.Index(i))
		}
		v.Set(s)
	default:
		t.Fatalf("fill: no value for a %s", v.Type())
	}
}

func TestStatusAndSnapshotRelayed(t *testing.T) {
	d := hosttest.NewDialer()
	d.Server("s").Set(func(b *hosttest.Behavior) { b.Stderr = "warn: \xff <b>tail</b>" })
	hosting, relaying, _ := pair(t, d, def("s"), def("t"))
	ctx := testCtx(t)
	if _, err := relaying.Call(ctx, "s", "tools/call", nil, host.CallOptions{}); err != nil {
		t.Fatal(err)
	}
	// The start fetches the catalogue in the background: let it land first.
	waitUntil(t, "the catalogue", func() bool {
		st, _, _ := hosting.Status(ctx, "s")
		return st.Catalog.Version == 1
	})
	local, ok, _ := hosting.Status(ctx, "s")
	relayed, rok, err := relaying.Status(ctx, "s")
	if !ok || !rok || err != nil {
		t.Fatalf("status: ok %v %v, %v", ok, rok, err)
	}
	normalize := func(st *host.Status) {
		st.Since, st.LastSeenAt, st.Catalog.FetchedAt = st.Since.UTC(), st.LastSeenAt.UTC(), st.Catalog.FetchedAt.UTC()
		st.StderrTail = strings.ToValidUTF8(st.StderrTail, "\uFFFD")
	}
	normalize(&local)
	normalize(&relayed)
	if !reflect.DeepEqual(local, relayed) {
		t.Errorf("status:\nlocal   %+v\nrelayed %+v", local, relayed)
	}
	if _, ok, err := relaying.Status(ctx, "missing"); ok || err != nil {
		t.Errorf("unknown server: ok %v, %v", ok, err)
	}
	snap, err := relaying.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lsnap, _ := hosting.Snapshot(ctx)
	if snap.Version != lsnap.Version || len(snap.Servers) != 2 || snap.Servers[0].Name != "s" || snap.Servers[1].Name != "t" {
		t.Errorf("snapshot %+v, host's %+v", snap, lsnap)
	}
}

func TestSessionKeysArePerProcess(t *testing.T) {
	d := hosttest.NewDialer()
	sess := def("browser")
	sess.Isolation = host.IsolationSession
	hosting, relaying, dir := pair(t, d, sess)
	other := open(t, dir, Options{NewHost: fakeHost(d, sess)})
	ctx := testCtx(t)
	for _, n := range []*Node{hosting, relaying, other} {
		if _, err := n.Call(ctx, "browser", "tools/call", nil, host.CallOptions{SessionKey: "turn-1"}); err != nil {
			t.Fatal(err)
		}
	}
	keys := func() (open []string) {
		for _, s := range d.Sessions("browser") {
			if !s.Closed() {
				open = append(open, s.Key)
			}
		}
		slices.Sort(open)
		return open
	}
	if got, want := keys(), []string{"local/turn-1", "relay/1/turn-1", "relay/2/turn-1"}; !slices.Equal(got, want) {
		t.Fatalf("per-session connections %v, want %v: one per process", got, want)
	}
	if err := relaying.EndSession(ctx, "turn-1"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "relay 1's session to close", func() bool { return slices.Equal(keys(), []string{"local/turn-1", "relay/2/turn-1"}) })
	// A process that goes away ends its sessions.
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := other.Close(cctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the closed process's session to close", func() bool { return slices.Equal(keys(), []string{"local/turn-1"}) })
	if err := hosting.EndSession(ctx, "turn-1"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the host's own session to close", func() bool { return len(keys()) == 0 })
}

func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestWatchRelayed(t *testing.T) {
	d := hosttest.NewDialer()
	hosting, relaying, _ := pair(t, d, def("s"))
	local, relayed := newRecorder(), newRecorder()
	defer hosting.Watch(local)()
	defer relaying.Watch(relayed)()
	for _, r := range []*recorder{local, relayed} {
		r.waitFor(t, "the first resync", func() bool { return r.resyncs > 0 })
	}
	ctx := testCtx(t)
	before, _ := hosting.Snapshot(ctx)
	h := hosting.local.h
	if err := h.SetEnabled("s", false); err != nil {
		t.Fatal(err)
	}
	if err := h.SetEnabled("s", true); err != nil {
		t.Fatal(err)
	}
	if _, err := relaying.Call(ctx, "s", "tools/call", nil, host.CallOptions{}); err != nil {
		t.Fatal(err)
	}
	after, _ := hosting.Snapshot(ctx)
	if after.Version <= before.Version+3 {
		t.Fatalf("too few events: snapshot %d then %d", before.Version, after.Version)
	}
	for name, r := range map[string]*recorder{"local": local, "relayed": relayed} {
		r.waitFor(t, name+" events up to the snapshot", func() bool {
			return len(r.all) > 0 && seqOf(r.all[len(r.all)-1]) >= after.Version
		})
		r.checkConsecutive(t, name)
	}
	window := func(r *recorder) []any {
		r.mu.Lock()
		defer r.mu.Unlock()
		var out []any
		for _, ev := range r.all {
			if s := seqOf(ev); s > before.Version && s <= after.Version {
				out = append(out, ev)
			}
		}
		return normalizeEvents(out)
	}
	if l, r := window(local), window(relayed); len(l) != int(after.Version-before.Version) || !reflect.DeepEqual(l, r) {
		t.Errorf("events %d..%d:\nlocal   %+v\nrelayed %+v", before.Version+1, after.Version, l, r)
	}
}

func normalizeEvents(evs []any) []any {
	out := make([]any, len(evs))
	for i, ev := range evs {
		switch e := ev.(type) {
		case host.ServerEvent:
			e.At = e.At.UTC()
			out[i] = e
		case host.StateEvent:
			e.At = e.At.UTC()
			out[i] = e
		case host.CatalogEvent:
			e.At = e.At.UTC()
			out[i] = e
		}
	}
	return out
}

// TestDepartureDuringASessionStart: a client that goes away while its call is starting
// a per-session connection leaves no session open.
func TestDepartureDuringASessionStart(t *testing.T) {
	d := hosttest.NewDialer()
	d.Server("browser").Set(func(b *hosttest.Behavior) { b.DialDelay = 300 * time.Millisecond })
	sess := def("browser")
	sess.Isolation = host.IsolationSession
	hosting, relaying, _ := pair(t, d, sess)
	go relaying.Call(context.Background(), "browser", "tools/call", nil, host.CallOptions{SessionKey: "k"})
	waitUntil(t, "the session's dial", func() bool { return d.Dials("browser") == 1 })
	ctx := testCtx(t)
	if err := relaying.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Once the start is settled (the dial returned: the state left starting and
	// stopping), nothing of it is open.
	waitUntil(t, "the departed client's start to be settled", func() bool {
		st, _, _ := hosting.Status(ctx, "browser")
		return st.State != host.StateStarting && st.State != host.StateStopping
	})
	st, _, _ := hosting.Status(ctx, "browser")
	if d.Open("browser") != 0 || st.Connections != 0 {
		t.Errorf("after the client left: %d sessions open, status %+v", d.Open("browser"), st)
	}
}
