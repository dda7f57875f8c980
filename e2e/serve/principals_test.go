package serve

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/store/storetest"
)

// Concurrent calls from several principals through the real daemon never cross: each
// principal is allowed exactly its own file, every answer matches the caller's grants,
// and the audit trail attributes every decision to the caller. (The kernel test runs
// 10,000 calls in-process; this one goes through HTTP and the durable store.)
func TestConcurrentPrincipalsThroughTheDaemon(t *testing.T) {
	var grants []policy.Grant
	var principals []string
	for i := 0; i < 4; i++ {
		p := fmt.Sprintf("agent%d", i)
		principals = append(principals, p)
		grants = append(grants, policy.Grant{Principal: p, Tool: "local.read_file", Action: "read",
			Resource: fmt.Sprintf("path:own/%s.txt", p), Effect: policy.Allow})
	}
	data, toks := setup(t, grants, principals...)
	ws := workspaceDir(t)
	for _, p := range principals {
		writeFile(t, ws, "own/"+p+".txt", "secret of "+p)
	}
	d := startServe(t, data, ws)

	const calls, workers = 800, 16
	type job struct{ caller, target string }
	jobs := make(chan job)
	var wg sync.WaitGroup
	var mu sync.Mutex
	want := map[string]map[audit.Decision]int{}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				body := `{"name":"local.read_file","arguments":{"path":"own/` + j.target + `.txt"}}`
				req, _ := http.NewRequest("POST", d.url+"/v1/tools/invoke", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+toks[j.caller])
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				got := string(b)
				own := j.caller == j.target
				mu.Lock()
				if want[j.caller] == nil {
					want[j.caller] = map[audit.Decision]int{}
				}
				if own {
					want[j.caller][audit.Allowed]++
				} else {
					want[j.caller][audit.Denied]++
				}
				mu.Unlock()
				switch {
				case own && !strings.Contains(got, "secret of "+j.caller):
					t.Errorf("%s reading its own file got %s", j.caller, got)
				case !own && (!strings.Contains(got, "no_matching_grant") || strings.Contains(got, "secret of")):
					t.Errorf("%s reading %s's file got %s", j.caller, j.target, got)
				}
			}
		}()
	}
	for i := 0; i < calls; i++ {
		jobs <- job{principals[i%len(principals)], principals[(i/len(principals)+i)%len(principals)]}
	}
	close(jobs)
	wg.Wait()

	evs := storetest.Trail(t, data)
	got := map[string]map[audit.Decision]int{}
	for _, e := range evs {
		if got[e.Principal] == nil {
			got[e.Principal] = map[audit.Decision]int{}
		}
		got[e.Principal][e.Decision]++
		if e.Decision == audit.Allowed && e.Resource != "path:own/"+e.Principal+".txt" {
			t.Errorf("event %d allowed %s to read %s", e.Seq, e.Principal, e.Resource)
		}
	}
	for _, p := range principals {
		if fmt.Sprint(got[p]) != fmt.Sprint(want[p]) {
			t.Errorf("%s: audit %v, calls %v", p, got[p], want[p])
		}
	}
}
