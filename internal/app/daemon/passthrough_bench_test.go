package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/app/daemon"
	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// passthroughWorld is `toolgate serve` in process: an App over a private data
// directory with the stdio fixture installed as "fx" (its own process, as a real
// upstream), fx.* granted to the default principal, and the daemon on loopback.
type passthroughWorld struct {
	base, token string
	client      *http.Client
}

func startPassthrough(b *testing.B) *passthroughWorld {
	b.Helper()
	ctx := context.Background()
	marker := upstreamtest.Marker(b)
	a, err := app.Open(ctx, app.Options{DataDir: filepath.Join(testenv.PrivateDir(b), "data")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		a.Close()
		upstreamtest.WaitGone(b, marker, 10*time.Second)
	})
	doc, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"fx": map[string]any{
		"command": upstreamtest.Fixture(b), "args": []string{"-marker", marker}}}})
	implicit := true
	if res, err := mgmt.Checked(a).Install(ctx, mgmt.Caller{Principal: app.DefaultPrincipal, Owner: true},
		mgmt.InstallParams{ConfigJSON: string(doc), AllowImplicitInvocation: &implicit}); err != nil || res.Status != mgmt.InstallOK {
		b.Fatalf("install: %+v %v", res, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	a.WaitFirstCatalogs(wctx)
	cancel()
	if _, err := a.Store().AddGrant(ctx, policy.Grant{Principal: app.DefaultPrincipal, Tool: "fx.*", Action: "execute", Effect: policy.Allow}); err != nil {
		b.Fatal(err)
	}
	d, err := daemon.Start(a, daemon.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Shutdown(context.Background(), time.Second) })
	token, _, err := a.OwnerToken()
	if err != nil {
		b.Fatal(err)
	}
	w := &passthroughWorld{base: d.URL(), token: token,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	b.Cleanup(w.client.CloseIdleConnections) // before the daemon's shutdown waits for them
	// The first catalogue may still be on its way into the kernel (the host publishes
	// it after WaitFirstCatalogs saw it fetched); a session sees the tools published
	// when it opens.
	deadline := time.Now().Add(20 * time.Second)
	for {
		sid, err := w.session()
		if err == nil {
			if err = w.call(sid); err == nil {
				return w
			}
		}
		if time.Now().After(deadline) {
			l, lerr := mgmt.Checked(a).List(ctx, mgmt.Caller{Principal: app.DefaultPrincipal, Owner: true}, mgmt.ListParams{})
			js, _ := json.Marshal(l)
			b.Fatalf("fx.echo never answered: %v\n%s %v", err, js, lerr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// session opens one MCP session: initialize, then the initialized notification.
func (w *passthroughWorld) session() (string, error) {
	var sid string
	if _, err := testenv.MCPCall(context.Background(), w.client, w.base, w.token, &sid, 0, "initialize",
		`{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}`); err != nil {
		return "", err
	}
	req, _ := http.NewRequest("POST", w.base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	req.Header.Set("Authorization", "Bearer "+w.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	resp, err := w.client.Do(req)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("initialized: status %d", resp.StatusCode)
	}
	return sid, nil
}

// call is one tools/call of fx.echo on the session sid.
func (w *passthroughWorld) call(sid string) error {
	res, err := testenv.MCPCall(context.Background(), w.client, w.base, w.token, &sid, 1, "tools/call",
		`{"name":"fx.echo","arguments":{"text":"hello"}}`)
	if err != nil {
		return err
	}
	if !bytes.Contains(res, []byte(`"hello"`)) || bytes.Contains(res, []byte(`"isError":true`)) {
		return fmt.Errorf("result %s", res)
	}
	return nil
}

// processCPU is this process's user+system CPU time: on a shared machine it moves
// less with the load than the wall clock does.
type processCPU time.Duration

func startCPU() processCPU { return processCPU(cpuNow()) }

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// report adds cpu-ns/op: the test process's CPU per call (the daemon and the
// client; the upstream's own process is not in it).
func (c processCPU) report(b *testing.B) {
	b.ReportMetric(float64(cpuNow()-time.Duration(c))/float64(b.N), "cpu-ns/op")
}

// BenchmarkPassthroughCall is one passthrough tools/call end to end, in process, as
// `toolgate serve` runs it: an HTTP POST on a session over loopback, the guard, the
// kernel's decision and durable audit event, the call forwarded over stdio to the
// fixture's own process and its answer back. One session, one call at a time (the
// c=1 of scripts/bench-passthrough.sh); the CPU figure includes the fixture's.
func BenchmarkPassthroughCall(b *testing.B) {
	w := startPassthrough(b)
	sid, err := w.session()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		if err := w.call(sid); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}

// BenchmarkPassthroughCallParallel is the same with concurrent sessions (8 per
// core), one call at a time on each: the c=8..32 of scripts/bench-passthrough.sh,
// where concurrent calls share the upstream process and the audit's group commit.
func BenchmarkPassthroughCallParallel(b *testing.B) {
	w := startPassthrough(b)
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := startCPU()
	defer cpu.report(b)
	b.RunParallel(func(pb *testing.PB) {
		sid, err := w.session()
		if err != nil {
			b.Error(err)
			return
		}
		for pb.Next() {
			if err := w.call(sid); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
