package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
)

// FuzzCallTool: whatever name and arguments arrive, the kernel answers a result (never
// an error or a panic); a refusal carries exactly the status/code _meta of
// docs/reason-codes.md; and an
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
		r, err := tr.CallTool(context.Background(), &mcpspec.CallRequest{Name: name, Arguments: json.RawMessage(args)})
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

// FuzzCapabilitiesNeverWiden: whatever capabilities a turn is opened with, its
// catalogue is a subset of the unnarrowed turn's, and a call the narrowed turn allows
// is allowed (by the same grant) on the unnarrowed one. Capabilities only take away.
func FuzzCapabilitiesNeverWiden(f *testing.F) {
	for _, s := range [][4]string{
		{"*", "", "files.read", `{"path":"docs/a"}`},
		{"files.*:read", "web.*", "files.write", `{"path":"docs/a"}`},
		{"files.write:write", "files.read", "files.write", `{"path":"secret/x"}`},
		{"web.fetch", "bash.*:execute", "bash.run", `{}`},
		{"toolgate.escalate", "", "toolgate.escalate", `{"reason":"r"}`},
		{"files.re*", "x", "files.read", `{}`},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	fx := newFixture(f, capTools(map[string]int{})...)
	fx.grants(f,
		policy.Grant{ID: "a", Principal: "p", Tool: "files.*", Action: "read", Resource: "path:docs/"},
		policy.Grant{ID: "b", Principal: "p", Tool: "files.write", Action: "write", Resource: "path:docs/"},
		policy.Grant{ID: "c", Principal: "p", Tool: "files.read", Resource: "path:docs/secret/", Effect: policy.Deny},
		policy.Grant{ID: "d", Principal: "p", Tool: "web.*"},
	)
	full := fx.turn(f, "p")
	fullNames := map[string]bool{}
	for _, n := range names(f, full) {
		fullNames[n] = true
	}
	f.Fuzz(func(t *testing.T, cap1, cap2, name, args string) {
		caps := []string{cap1}
		if cap2 != "" {
			caps = append(caps, cap2)
		}
		narrow, err := fx.k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: "p", Capabilities: caps})
		if err != nil {
			if !errors.Is(err, policy.ErrInvalidCapability) {
				t.Fatalf("OpenTurn(%q): %v, want ErrInvalidCapability", caps, err)
			}
			return
		}
		for _, n := range names(t, narrow) {
			if !fullNames[n] {
				t.Fatalf("capabilities %q published %s, which the grants do not", caps, n)
			}
		}
		req := &mcpspec.CallRequest{Name: name, Arguments: json.RawMessage(args)}
		r, err := narrow.CallTool(context.Background(), req)
		if err != nil {
			t.Fatalf("CallTool: %v", err)
		}
		if r.IsError {
			return
		}
		grant := fx.aud.Last().GrantID
		r2, err := full.CallTool(context.Background(), req)
		if err != nil || r2.IsError || fx.aud.Last().GrantID != grant {
			t.Fatalf("capabilities %q allowed %s %s (grant %s), the grants alone do not: %+v %v", caps, name, args, grant, r2, err)
		}
	})
}
