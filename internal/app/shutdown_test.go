package app_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/store"
)

// Close while a call runs — what every command does last, whatever its surface did
// before — cancels the call and writes its outcome to the real store before closing
// it: the trail has allowed then failed cancelled_by_shutdown, and verifies. Before,
// the store closed under the call and its outcome failed with "sql: database is closed".
func TestCloseRecordsTheOutcomeOfARunningCall(t *testing.T) {
	ctx := context.Background()
	dir := dataDir(t)
	started := make(chan struct{})
	hold := &kernel.Tool{ID: "local.hold", InputSchema: json.RawMessage(`{"type":"object"}`),
		Run: func(ctx context.Context, _ *kernel.Call) (*kernel.Output, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		}}
	a, err := app.Open(ctx, app.Options{DataDir: dir, Tools: []*kernel.Tool{hold}})
	if err != nil {
		t.Fatal(err)
	}
	tr := mustTurn(t, a, app.DefaultPrincipal)
	answered := make(chan *mcpspec.CallResult, 1)
	go func() {
		r, _ := tr.CallTool(ctx, &mcpspec.CallRequest{Name: "local.hold"})
		answered <- r
	}()
	<-started
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-answered:
		if r == nil || !r.IsError || r.Meta["toolgate/code"] != "cancelled_by_shutdown" {
			t.Errorf("the running call answered %+v", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call is still running after Close returned: nothing cancelled it")
	}
	st, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs, err := st.ListAudit(ctx, audit.Filter{Tool: "local.hold"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Decision != audit.Allowed || evs[1].Decision != audit.Failed || evs[1].Code != "cancelled_by_shutdown" {
		t.Fatalf("events %+v, want allowed then failed cancelled_by_shutdown", evs)
	}
	all, _ := st.ListAudit(ctx, audit.Filter{})
	if err := audit.Verify(all); err != nil {
		t.Error(err)
	}
}
