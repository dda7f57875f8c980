package kernel_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/policy"
)

// FuzzCallTool: whatever name and arguments arrive, the kernel answers a result (never
// an error or a panic); a refusal carries exactly the seed's status/code _meta; and an
// allowed call is audited before it is answered.
func FuzzCallTool(f *testing.F) {
	for _, s := range [][2]string{
		{"files.read", `{"path":"docs/a.md"}`},
		{"files.read", `{"path":"docs/../../x"}`},
		{"files.read", `{"path":7}`},
		{"files.read", `[]`},
		{"files.read", `null`},
		{"nope", `{}`},
		{"toolgate.escalate", `{"reason":"r"}`},
		{"", ``},
	} {
		f.Add(s[0], s[1])
	}
	fx := newFixture(f, echoTool("files.read"))
	fx.grants(f, policy.Grant{Principal: "p", Tool: "files.*", Action: "read", Resource: "path:docs/"})
	tr := fx.turn(f, "p")
	f.Fuzz(func(t *testing.T, name, args string) {
		before := fx.aud.Len()
		r, err := tr.CallTool(context.Background(), &mcpserver.CallRequest{Name: name, Arguments: json.RawMessage(args)})
		if err != nil {
			t.Fatalf("CallTool error: %v", err)
		}
		if n := fx.aud.Len() - before; n != 1 {
			t.Fatalf("%d audit events for one call", n)
		}
		if r.IsError {
			if r.Meta["toolgate/status"] == nil || r.Meta["toolgate/code"] == nil {
				t.Fatalf("refusal without _meta: %+v", r)
			}
			return
		}
		if name != "files.read" {
			t.Fatalf("%q succeeded", name)
		}
	})
}
