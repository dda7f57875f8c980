package daemon_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/policy"
)

// BenchmarkReplicasInvoke is calls per second through the round-robin proxy to one,
// two and three replicas on one PostgreSQL database: concurrent clients (8 per core)
// POST /v1/tools/invoke, each call authorized, audited in the shared chain and answered.
// On one machine the replicas, the proxy, the clients and PostgreSQL share its cores,
// so the figure says what the machine allows, not what replicas scale to.
func BenchmarkReplicasInvoke(b *testing.B) {
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			rs := startReplicas(b, n)
			if _, err := rs.apps[0].Store().AddGrant(context.Background(), policy.Grant{Principal: "ann", Tool: "local.echo", Action: "*", Effect: policy.Allow}); err != nil {
				b.Fatal(err)
			}
			token, err := rs.apps[0].MintToken("ann", "bench", 3600)
			if err != nil {
				b.Fatal(err)
			}
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			call := func() error {
				req, _ := http.NewRequest("POST", rs.proxy.URL+"/v1/tools/invoke", strings.NewReader(`{"name":"local.echo","arguments":{}}`))
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					return err
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || strings.Contains(string(body), `"isError":true`) {
					return fmt.Errorf("%d %s", resp.StatusCode, body)
				}
				return nil
			}
			if err := call(); err != nil {
				b.Fatal(err)
			}
			b.SetParallelism(8)
			start := time.Now()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := call(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		})
	}
}

// BenchmarkReplicasSessionCalls is the same through legacy MCP sessions: each client
// opens one session (initialize through the proxy) and sends tools/call on it, so
// every replica serves every session, taking it up once (docs/deployment.md,
// "Sessions on any replica").
func BenchmarkReplicasSessionCalls(b *testing.B) {
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			rs := startReplicas(b, n)
			if _, err := rs.apps[0].Store().AddGrant(context.Background(), policy.Grant{Principal: "ann", Tool: "local.echo", Action: "*", Effect: policy.Allow}); err != nil {
				b.Fatal(err)
			}
			token, err := rs.apps[0].MintToken("ann", "bench", 3600)
			if err != nil {
				b.Fatal(err)
			}
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			send := func(sid, body string) (string, error) {
				req, _ := http.NewRequest("POST", rs.proxy.URL+"/mcp", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json")
				if sid != "" {
					req.Header.Set("Mcp-Session-Id", sid)
				}
				resp, err := client.Do(req)
				if err != nil {
					return "", err
				}
				out, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 != 2 || strings.Contains(string(out), `"isError":true`) {
					return "", fmt.Errorf("%d %s", resp.StatusCode, out)
				}
				return resp.Header.Get("Mcp-Session-Id"), nil
			}
			open := func() (string, error) {
				sid, err := send("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`)
				if err != nil {
					return "", err
				}
				_, err = send(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
				return sid, err
			}
			call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"local.echo","arguments":{}}}`
			b.SetParallelism(8)
			start := time.Now()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				sid, err := open()
				if err != nil {
					b.Error(err)
					return
				}
				for pb.Next() {
					if _, err := send(sid, call); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		})
	}
}
