package trust

import (
	"path/filepath"
	"strings"
	"testing"
)

// Under `pin: "approve"` every tool of a server is held until the owner approves it
// through the CLI; a running serve publishes an approved tool at its next request, and
// another server (tofu) works throughout.
func TestApprovePolicyHoldsNewToolsUntilApproved(t *testing.T) {
	r := newRig(t)
	if out, code := r.install(map[string]server{"fx": fixture(t), "other": fixture(t)}); code != 0 {
		t.Fatalf("install: %s", out)
	}
	r.tg("pins", "policy", "fx", "--pin", "approve")
	r.grant("--principal", "default", "--tool", "*")
	r.serve()
	r.waitTools("default", "other.echo")
	eventually(t, "fx's tools held as new", func() bool {
		return strings.Contains(r.tg("pins", "ls", "fx"), "echo")
	})
	if !r.listed("default", []string{"other.echo"}, []string{"fx.echo", "fx.env"}) {
		t.Fatal("a tool of an approve-policy server is published before any approval")
	}
	ls := r.tg("pins", "ls", "fx")
	if !strings.Contains(ls, "new") || !strings.Contains(ls, "pending") {
		t.Fatalf("pins ls fx: %s", ls)
	}
	s := r.client("default", nil)
	if txt, isErr := call(t, s, "fx.echo", map[string]any{"text": "x"}); !isErr {
		t.Fatalf("a held tool answered: %s", txt)
	}
	if txt, isErr := call(t, s, "other.echo", map[string]any{"text": "still here"}); isErr || txt != "still here" {
		t.Fatalf("the other server: %s", txt)
	}
	r.tg("pins", "approve", "fx", "echo", "--digest", r.digestOf("fx", "echo"), "--by", "owner")
	eventually(t, "the approved echo published", func() bool {
		return r.listed("default", []string{"fx.echo", "other.echo"}, []string{"fx.env"})
	})
	if txt, isErr := call(t, r.client("default", nil), "fx.echo", map[string]any{"text": "approved"}); isErr || txt != "approved" {
		t.Fatalf("the approved echo: %s", txt)
	}
	if !strings.Contains(r.tg("pins", "ls", "fx"), "owner") {
		t.Fatal("pins ls does not say who approved")
	}
}

// A rug pull made through the binary (the upstream changes echo and says
// list_changed) is quarantined: new sessions do not list echo, a session opened before
// has its call refused tool_quarantined, the rest of the server and another server
// keep working; and the quarantine survives a restart of serve and of the upstream,
// which keeps listing the pulled definition.
func TestQuarantineSurvivesRestart(t *testing.T) {
	r := newRig(t)
	pulled := filepath.Join(t.TempDir(), "pulled")
	if out, code := r.install(map[string]server{"fx": fixture(t, "-hostile", "-pull-file", pulled), "other": fixture(t)}); code != 0 {
		t.Fatalf("install: %s", out)
	}
	r.grant("--principal", "default", "--tool", "*")
	r.serve()
	r.waitTools("default", "fx.echo", "other.echo")
	old := r.client("default", nil)
	if txt, _ := call(t, old, "fx.rug_pull", nil); txt != "pulled" {
		t.Fatalf("rug_pull: %s", txt)
	}
	eventually(t, "echo quarantined", func() bool {
		return r.listed("default", []string{"fx.env", "other.echo"}, []string{"fx.echo"})
	})
	// The daemon's session follows list_changed to the new catalogue, where echo is
	// unknown (tool_unavailable); a turn still on the old one is refused
	// tool_quarantined. Either way nothing reaches the server.
	txt, isErr := call(t, old, "fx.echo", map[string]any{"text": "x"})
	if !isErr || !(strings.Contains(txt, "tool_quarantined") || strings.Contains(txt, "tool_unavailable")) {
		t.Fatalf("echo on a session opened before the pull: %v %s", isErr, txt)
	}
	if !r.hasEvent("fx.echo", "pin", "denied", "tool_quarantined") {
		t.Fatalf("audit of fx.echo: %+v", r.audit("fx.echo"))
	}
	if txt, isErr := call(t, old, "fx.env", nil); isErr {
		t.Fatalf("the rest of the server: %s", txt)
	}
	d, raw := r.details("fx")
	held := false
	for _, h := range d.Trust.Holds {
		held = held || (h.Tool == "echo" && h.Reason == "changed")
	}
	if !held || !strings.Contains(raw, "id_rsa") {
		t.Fatalf("details --json shows no changed hold of echo with its diff:\n%s", raw)
	}

	r.stop()
	r.serve()
	r.waitTools("default", "fx.env", "other.echo")
	if !r.listed("default", nil, []string{"fx.echo"}) {
		t.Fatal("the quarantined echo is published after a restart")
	}
	if txt, isErr := call(t, r.client("default", nil), "fx.echo", map[string]any{"text": "x"}); !isErr {
		t.Fatalf("the quarantined echo answered after a restart: %s", txt)
	}
	if !strings.Contains(r.tg("pins", "ls", "fx"), "changed") {
		t.Fatal("the hold is gone after a restart")
	}
	r.tg("pins", "reject", "fx", "echo", "--digest", r.digestOf("fx", "echo"))
	if !r.listed("default", []string{"fx.env", "other.echo"}, []string{"fx.echo"}) {
		t.Fatal("after a rejection")
	}
}
