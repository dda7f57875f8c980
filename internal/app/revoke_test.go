package app_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
)

// A grant removed by another process (`toolgate grant rm` while a bridge or
// `toolgate mcp` runs) stops the open turn at its next call: the catalogue stays what
// the harness was shown, the call is refused no_matching_grant, and the tool does not run.
func TestRevocationReachesAnOpenTurn(t *testing.T) {
	ctx := context.Background()
	a, other := openWithOther(t)
	g, err := other.AddGrant(ctx, policy.Grant{Principal: "bob", Tool: "local.echo", Action: "execute", Effect: policy.Allow})
	if err != nil {
		t.Fatal(err)
	}
	tr := mustTurn(t, a, "bob")
	callEcho := func() *mcpspec.CallResult {
		t.Helper()
		res, err := tr.CallTool(ctx, &mcpspec.CallRequest{Name: "local.echo", Arguments: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := callEcho(); res.IsError {
		t.Fatalf("granted call refused: %+v", res.Meta)
	}
	before, _ := tr.ListTools(ctx)

	if err := other.RemoveGrant(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	res := callEcho()
	if !res.IsError || res.Meta["toolgate/code"] != "no_matching_grant" {
		t.Errorf("call after the grant was removed elsewhere: isError=%v meta=%v", res.IsError, res.Meta)
	}
	after, _ := tr.ListTools(ctx)
	if before.CatalogHash != after.CatalogHash {
		t.Errorf("the open turn's catalogue changed")
	}

	// Granting again elsewhere lets the open turn call again (still within what it was shown).
	if _, err := other.AddGrant(ctx, policy.Grant{Principal: "bob", Tool: "local.*", Action: "*", Effect: policy.Allow}); err != nil {
		t.Fatal(err)
	}
	if res := callEcho(); res.IsError {
		t.Errorf("call after the grant came back: %+v", res.Meta)
	}
}
