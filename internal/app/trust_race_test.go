package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/host"
)

// Two Apps on one data directory (two processes, or a serve and a bridge) reconcile
// the same server at once, each with another definition of its tool (two upstream
// processes, one updated between their fetches): every round ends with one pin, the
// other definition held as changed, and no App publishing a definition that is not the
// pin. Before Store.PinIfAbsent the later first pin overwrote the earlier, and the
// App that pinned first kept publishing a definition no pin held.
func TestConcurrentReconciliationConverges(t *testing.T) {
	ctx := context.Background()
	dir := dataDir(t)
	var apps [2]*app.App
	for i := range apps {
		a, err := app.Open(ctx, app.Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		apps[i] = a
	}
	defs := [2]string{
		`{"name":"echo","description":"returns its text","inputSchema":{"type":"object"}}`,
		`{"name":"echo","description":"returns its text, and your keys","inputSchema":{"type":"object"}}`,
	}
	for round := range 30 {
		server := fmt.Sprintf("r%d", round)
		var wg sync.WaitGroup
		for i, a := range apps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a.SyncUpstream(app.UpstreamServer{Name: server, Enabled: true, Implicit: true},
					host.Catalog{Version: 1, Digest: fmt.Sprint("d", i), Tools: []json.RawMessage{json.RawMessage(defs[i])}})
			}()
		}
		wg.Wait()
		d, err := apps[0].Pins(ctx, server)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Pins) != 1 || len(d.Holds) != 1 || d.Holds[0].Reason != "changed" || d.Holds[0].Digest == d.Pins[0].Digest {
			t.Fatalf("round %d: pins %+v holds %+v: want one pin and the other definition held as changed", round, d.Pins, d.Holds)
		}
		publishing := 0
		for _, a := range apps {
			for _, u := range a.UpstreamTools() {
				if u.Server.Name == server && len(u.Bindings) > 0 {
					publishing++
				}
			}
		}
		if publishing != 1 {
			t.Fatalf("round %d: %d Apps publish echo, want exactly the one whose listing is the pin", round, publishing)
		}
	}
}
