package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/policy"
)

// capTools are a read tool, a write tool, an execute tool and a second namespace; ran
// counts the runs of each.
func capTools(ran map[string]int) []*kernel.Tool {
	runner := func(id string) func(context.Context, *kernel.Call) (*kernel.Output, error) {
		return func(context.Context, *kernel.Call) (*kernel.Output, error) {
			ran[id]++
			return &kernel.Output{Text: "ok"}, nil
		}
	}
	read := echoTool("files.read")
	read.Run = runner("files.read")
	write := &kernel.Tool{ID: "files.write",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
		Access: func(a map[string]any) (kernel.Access, error) {
			return kernel.Access{Action: kernel.ActionWrite, Resource: "path:" + a["path"].(string)}, nil
		},
		Run: runner("files.write")}
	bash := &kernel.Tool{ID: "bash.run", InputSchema: json.RawMessage(`{"type":"object"}`), Run: runner("bash.run")}
	fetch := echoTool("web.fetch")
	fetch.Run = runner("web.fetch")
	return []*kernel.Tool{read, write, bash, fetch}
}

func openCaps(t *testing.T, f *fixture, principal string, caps ...string) *kernel.Turn {
	t.Helper()
	tr, err := f.k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: principal, Transport: "test", Capabilities: caps})
	if err != nil {
		t.Fatalf("OpenTurn(%q, %q): %v", principal, caps, err)
	}
	return tr
}

func TestCapabilitiesNarrow(t *testing.T) {
	ran := map[string]int{}
	f := newFixture(t, capTools(ran)...)
	f.grants(t,
		policy.Grant{ID: "gf", Principal: "p", Tool: "files.*"},
		policy.Grant{ID: "gw", Principal: "p", Tool: "web.fetch"},
		policy.Grant{ID: "ge", Principal: "p", Tool: kernel.EscalateID},
	)
	if got := strings.Join(names(t, f.turn(t, "p")), ","); got != "files.read,files.write,toolgate.escalate,web.fetch" {
		t.Fatalf("unnarrowed catalogue: %s", got)
	}

	t.Run("catalogue is grants ∩ capabilities", func(t *testing.T) {
		for caps, want := range map[string]string{
			"files.*":                   "files.read,files.write",
			"files.read":                "files.read",
			"files.read,web.fetch":      "files.read,web.fetch",
			"*":                         "files.read,files.write,toolgate.escalate,web.fetch",
			"files.*:read":              "files.read,files.write", // the action is checked per call
			"bash.*":                    "",                       // no grant: a capability cannot publish it
			"bash.run,toolgate.*":       "toolgate.escalate",
			"nosuch.*,files.write:read": "files.write",
		} {
			if got := strings.Join(names(t, openCaps(t, f, "p", strings.Split(caps, ",")...)), ","); got != want {
				t.Errorf("capabilities %s: catalogue %q, want %q", caps, got, want)
			}
		}
	})

	t.Run("a tool outside the capabilities is unavailable like an unpublished one", func(t *testing.T) {
		tr := openCaps(t, f, "p", "files.*")
		outside := refusal(t, call(t, tr, "web.fetch", `{}`), kernel.StatusDenied, kernel.CodeToolUnavailable)
		if e := f.aud.Last(); e.Code != string(kernel.CodeOutsideCapability) || e.Tool != "web.fetch" || e.Decision != audit.Denied {
			t.Errorf("audit %+v, want outside_capability for web.fetch", e)
		}
		unknown := refusal(t, call(t, tr, "web.fetcx", `{}`), kernel.StatusDenied, kernel.CodeToolUnavailable)
		if strings.Replace(outside.Message, "web.fetch", "NAME", 1) != strings.Replace(unknown.Message, "web.fetcx", "NAME", 1) ||
			outside.Retryable != nil || unknown.Retryable != nil {
			t.Errorf("outside the capabilities %+v differs from unknown %+v", outside, unknown)
		}
		// A tool the grants would not publish either is audited plainly.
		refusal(t, call(t, tr, "bash.run", `{}`), kernel.StatusDenied, kernel.CodeToolUnavailable)
		if e := f.aud.Last(); e.Code != string(kernel.CodeToolUnavailable) {
			t.Errorf("ungranted tool audited %q, want tool_unavailable", e.Code)
		}
		if ran["web.fetch"]+ran["bash.run"] != 0 {
			t.Errorf("a refused tool ran: %v", ran)
		}
	})

	t.Run("the action suffix is checked against the derived action", func(t *testing.T) {
		tr := openCaps(t, f, "p", "files.*:read", "hidden.secret_tool")
		if r := call(t, tr, "files.read", `{"path":"docs/a"}`); r.IsError {
			t.Fatalf("read under files.*:read refused: %s", mustJSON(r))
		}
		if e := f.aud.Last(); e.Decision != audit.Allowed || e.GrantID != "gf" {
			t.Errorf("allowed read audited %+v", e)
		}
		before := ran["files.write"]
		b := refusal(t, call(t, tr, "files.write", `{"path":"docs/a"}`), kernel.StatusDenied, kernel.CodeOutsideCapability)
		if strings.Contains(b.Message, "secret_tool") || strings.Contains(f.aud.Last().Message, "secret_tool") {
			t.Errorf("the refusal lists the turn's capabilities, naming a tool the caller is not shown: %q", b.Message)
		}
		if e := f.aud.Last(); e.Code != string(kernel.CodeOutsideCapability) || e.Action != "write" || e.Resource != "path:docs/a" || e.GrantID != "" {
			t.Errorf("audit %+v, want outside_capability write on path:docs/a", e)
		}
		if ran["files.write"] != before {
			t.Errorf("files.write ran outside the capability")
		}
		// Any of several capabilities may allow a call.
		tr = openCaps(t, f, "p", "files.*:read", "files.write:write")
		if r := call(t, tr, "files.write", `{"path":"docs/a"}`); r.IsError {
			t.Errorf("files.write:write did not allow the write: %s", mustJSON(r))
		}
		// An execute-only capability refuses the read of the same tool.
		tr = openCaps(t, f, "p", "files.read:execute")
		refusal(t, call(t, tr, "files.read", `{}`), kernel.StatusDenied, kernel.CodeOutsideCapability)
	})

	t.Run("never widens", func(t *testing.T) {
		// No grants: every capability still shows nothing and allows nothing.
		for _, caps := range [][]string{{"*"}, {"files.*"}, {"files.write:write"}, {"*:read", "*:write", "*:execute"}} {
			tr := openCaps(t, f, "nobody", caps...)
			if got := names(t, tr); len(got) != 0 {
				t.Errorf("capabilities %q show an ungranted principal %v", caps, got)
			}
			refusal(t, call(t, tr, "files.read", `{}`), kernel.StatusDenied, kernel.CodeToolUnavailable)
		}
		// A read-only grant stays read-only under a write capability.
		f2 := newFixture(t, capTools(map[string]int{})...)
		f2.grants(t, policy.Grant{Principal: "p", Tool: "files.write", Action: "read"},
			policy.Grant{ID: "deny", Principal: "p", Tool: "files.read", Resource: "path:secret/", Effect: policy.Deny},
			policy.Grant{Principal: "p", Tool: "files.read"})
		tr := openCaps(t, f2, "p", "files.write:write", "*")
		refusal(t, call(t, tr, "files.write", `{"path":"a"}`), kernel.StatusDenied, kernel.CodeNoMatchingGrant)
		// An explicit deny still wins under "*".
		refusal(t, call(t, tr, "files.read", `{"path":"secret/k"}`), kernel.StatusDenied, kernel.CodeExplicitDeny)
		if e := f2.aud.Last(); e.GrantID != "deny" {
			t.Errorf("deny audited with grant %q", e.GrantID)
		}
		// A disabled namespace stays hidden whatever the capabilities.
		f2.k.SetNamespaces(map[string]bool{"files": false})
		if got := names(t, openCaps(t, f2, "p", "files.*")); len(got) != 0 {
			t.Errorf("a capability showed a disabled namespace: %v", got)
		}
	})

	t.Run("escalation is narrowed like any tool", func(t *testing.T) {
		tr := openCaps(t, f, "p", "files.*")
		refusal(t, call(t, tr, kernel.EscalateID, `{"reason":"r"}`), kernel.StatusDenied, kernel.CodeToolUnavailable)
		if tr.Outcome() != kernel.OutcomeCompleted || len(f.esc.List()) != 0 {
			t.Errorf("an escalation outside the capabilities was recorded")
		}
	})
}

func TestCapabilitiesCatalogHash(t *testing.T) {
	f := newFixture(t, capTools(map[string]int{})...)
	f.grants(t, policy.Grant{Principal: "p", Tool: "*"})
	hash := func(tr *kernel.Turn) string {
		l, err := tr.ListTools(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return l.CatalogHash
	}
	full := hash(f.turn(t, "p"))
	narrow := hash(openCaps(t, f, "p", "files.*"))
	if narrow == full {
		t.Fatalf("a narrowed catalogue has the unnarrowed hash")
	}
	// The hash is that of the narrowed tool set, however the set was reached: the same
	// tools granted directly, or other capabilities naming the same tools in another
	// order, duplicated, or with action suffixes (which do not change visibility).
	g := newFixture(t, capTools(map[string]int{})...)
	g.grants(t, policy.Grant{Principal: "q", Tool: "files.*"})
	for name, h := range map[string]string{
		"granted directly":  hash(g.turn(t, "q")),
		"exact ids":         hash(openCaps(t, f, "p", "files.write", "files.read")),
		"reordered, dup'd":  hash(openCaps(t, f, "p", "files.read", "files.read", "files.write")),
		"action suffixes":   hash(openCaps(t, f, "p", "files.read:read", "files.write:write")),
		"wider than grants": hash(openCaps(t, g, "q", "*")),
	} {
		if h != narrow {
			t.Errorf("%s: hash %s, want %s", name, h, narrow)
		}
	}
	// Cached catalogues never leak between capability sets: alternate them.
	for i := 0; i < 3; i++ {
		if got := strings.Join(names(t, openCaps(t, f, "p", "web.*")), ","); got != "web.fetch" {
			t.Fatalf("round %d web.*: %s", i, got)
		}
		if got := len(names(t, f.turn(t, "p"))); got != 5 {
			t.Fatalf("round %d unnarrowed: %d tools", i, got)
		}
		if h := hash(openCaps(t, f, "p", "files.*")); h != narrow {
			t.Fatalf("round %d files.*: hash changed", i)
		}
	}
	// A renamed surface narrows the same way.
	tr, err := f.k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: "p", Capabilities: []string{"web.*"},
		Namer: func(id string) string { return "x_" + strings.ReplaceAll(id, ".", "_") }})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names(t, tr), ","); got != "x_web_fetch" {
		t.Errorf("renamed narrowed catalogue: %s", got)
	}
	refusal(t, call(t, tr, "x_files_read", `{}`), kernel.StatusDenied, kernel.CodeToolUnavailable)
	if e := f.aud.Last(); e.Code != string(kernel.CodeOutsideCapability) || e.Tool != "files.read" {
		t.Errorf("renamed outside tool audited %+v", e)
	}
}

func TestCapabilitySyntaxRefusedAtOpen(t *testing.T) {
	f := newFixture(t, echoTool("files.read"))
	f.grants(t, policy.Grant{Principal: "p", Tool: "*"})
	many := make([]string, policy.MaxCapabilities+1)
	for i := range many {
		many[i] = fmt.Sprintf("ns.t%d", i)
	}
	for name, caps := range map[string][]string{
		"empty":            {""},
		"partial wildcard": {"files.re*"},
		"wildcard ns":      {"*.read"},
		"no namespace":     {"read"},
		"upper namespace":  {"Files.read"},
		"unknown action":   {"files.read:delete"},
		"empty action":     {"files.read:"},
		"star action":      {"files.read:*"},
		"two actions":      {"files.read:read:write"},
		"resource-like":    {"path:docs/"},
		"space":            {" files.read"},
		"newline":          {"files.read\n"},
		"NUL":              {"files.read\x00"},
		"invalid UTF-8":    {"files.\xff"},
		"huge":             {"files." + strings.Repeat("a", 10000)},
		"one bad of many":  {"files.*", "web.*:nope"},
		"too many":         many,
	} {
		_, err := f.k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: "p", Capabilities: caps})
		if !errors.Is(err, policy.ErrInvalidCapability) {
			t.Errorf("%s: OpenTurn = %v, want ErrInvalidCapability", name, err)
			continue
		}
		if len(err.Error()) > 600 || strings.ContainsAny(err.Error(), "\n\x00") {
			t.Errorf("%s: error is not a short single line: %q", name, err)
		}
	}
	for _, ok := range []string{"*", "files.*", "files.read", "files.read:read", "*:write", "ns.*:execute", "my-ns.tool.v2"} {
		if _, err := f.k.OpenTurn(context.Background(), kernel.TurnOptions{Principal: "p", Capabilities: []string{ok}}); err != nil {
			t.Errorf("capability %q refused: %v", ok, err)
		}
	}
}
