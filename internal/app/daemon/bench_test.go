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
