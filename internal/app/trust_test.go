package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/textscan"
	"github.com/toolgate/toolgate/internal/toolpin"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// hostileWorld is an upstreamWorld whose servers are fixture processes started with
// -hostile (fixturedata.HostileTools), over a data directory the test may reopen.
func hostileWorld(t *testing.T, dir string, servers ...string) *upstreamWorld {
	t.Helper()
	w := &upstreamWorld{markers: map[string]string{}}
	w.openAt(t, dir, upstreamtest.NewHost(w.specs(t, servers, "-hostile")...), nil)
	return w
}

func call(t *testing.T, tr app.Turn, name, args string) *mcpspec.CallResult {
	t.Helper()
	r, err := tr.CallTool(context.Background(), &mcpspec.CallRequest{Name: name, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("calling %s: %v", name, err)
	}
	return r
}

func codeOf(r *mcpspec.CallResult) string {
	c, _ := r.Meta["toolgate/code"].(string)
	return c
}

func holdOf(t *testing.T, d *app.TrustDetails, tool string) app.HeldTool {
	t.Helper()
	for _, h := range d.Holds {
		if h.Tool == tool {
			return h
		}
	}
	t.Fatalf("no hold for %s in %+v", tool, d.Holds)
	return app.HeldTool{}
}

// A rug pull: a pinned tool's definition changes after it was pinned. The changed tool
// leaves every new catalogue, its calls on turns opened before are refused
// tool_quarantined, the other tools keep working, the old pin is kept and the
// difference is shown; the quarantine survives a restart; an approval of the digest
// shown re-pins it and publishes it again.
func TestUpstreamRugPull(t *testing.T) {
	ctx := context.Background()
	dir := dataDir(t)
	w := hostileWorld(t, dir, "fx")
	w.grant(t, "fx.*")
	w.sync(t, "fx", true, true)
	before := w.turn(t)
	names := listed(t, before)
	for _, n := range []string{"fx.echo", "fx.rug_pull", "fx.wipe"} {
		if !slices.Contains(names, n) {
			t.Fatalf("%s not published before the rug pull: %v", n, names)
		}
	}
	pinned, err := w.a.Pins(ctx, "fx")
	if err != nil {
		t.Fatal(err)
	}
	var oldDigest string
	for _, p := range pinned.Pins {
		if p.Tool == "echo" {
			oldDigest = p.Digest
		}
	}
	if oldDigest == "" || len(pinned.Holds) != 1 || pinned.Holds[0].Tool != "hidden" {
		t.Fatalf("after the first listing: pins %+v holds %+v (want echo pinned, only hidden held)", pinned.Pins, pinned.Holds)
	}

	if r := call(t, before, "fx.rug_pull", `{}`); r.IsError {
		t.Fatalf("rug_pull: %+v", r)
	}
	w.sync(t, "fx", true, true) // the listing after its list_changed

	after := w.turn(t)
	names = listed(t, after)
	if slices.Contains(names, "fx.echo") || !slices.Contains(names, "fx.wipe") || !slices.Contains(names, "fx.rug_pull") {
		t.Fatalf("after the rug pull the new catalogue is %v: want echo hidden, the others kept", names)
	}
	r := call(t, before, "fx.echo", `{"text":"x"}`)
	if !r.IsError || codeOf(r) != "tool_quarantined" || r.Meta["toolgate/status"] != "denied" {
		t.Fatalf("calling the changed echo on a turn opened before: %+v", r)
	}
	if r := call(t, after, "fx.echo", `{"text":"x"}`); codeOf(r) != "tool_unavailable" {
		t.Fatalf("calling echo on a turn opened after: %+v", r)
	}
	if r := call(t, before, "fx.wipe", `{}`); r.IsError {
		t.Fatalf("an unchanged tool stopped working: %+v", r)
	}
	d, err := w.a.Pins(ctx, "fx")
	if err != nil {
		t.Fatal(err)
	}
	h := holdOf(t, d, "echo")
	if h.Reason != toolpin.HoldChanged || h.PinnedDigest != oldDigest || h.Diff == nil || !strings.Contains(h.Diff.String(), "id_rsa") {
		t.Fatalf("the hold of echo: %+v diff %v", h.Hold, h.Diff)
	}
	if !slices.ContainsFunc(d.Pins, func(p toolpin.Pin) bool { return p.Tool == "echo" && p.Digest == oldDigest }) {
		t.Fatal("the old pin was not kept")
	}
	evs, _ := w.a.Audit(ctx, audit.Filter{Tool: "fx.echo", Decision: "denied"})
	if !slices.ContainsFunc(evs, func(e audit.Event) bool { return e.Action == "pin" && e.Code == "tool_quarantined" }) ||
		!slices.ContainsFunc(evs, func(e audit.Event) bool { return e.Action == "execute" && e.Code == "tool_quarantined" }) {
		t.Fatalf("audit of echo: %+v", evs)
	}
	w.close(t)

	// A restart: the server lists the changed definition again (a new process of it,
	// pulled again); echo stays quarantined.
	w = hostileWorld(t, dir, "fx")
	defer w.close(t)
	w.sync(t, "fx", true, true)
	puller := w.turn(t)
	call(t, puller, "fx.rug_pull", `{}`)
	w.sync(t, "fx", true, true)
	if names := listed(t, w.turn(t)); slices.Contains(names, "fx.echo") {
		t.Fatalf("echo published again after a restart: %v", names)
	}
	d, _ = w.a.Pins(ctx, "fx")
	h = holdOf(t, d, "echo")

	// Approving names the digest shown; another digest is refused and changes nothing.
	var stale *toolpin.StaleError
	if err := w.a.ApprovePin(ctx, "fx", "echo", oldDigest, "owner"); !errors.As(err, &stale) {
		t.Fatalf("approving another digest: %v", err)
	}
	if err := w.a.ApprovePin(ctx, "fx", "echo", "", "owner"); !errors.Is(err, app.ErrNoDigest) {
		t.Fatalf("approving without a digest: %v", err)
	}
	if err := w.a.ApprovePin(ctx, "fx", "echo", h.Digest, "owner"); err != nil {
		t.Fatal(err)
	}
	approved := w.turn(t)
	if !slices.Contains(listed(t, approved), "fx.echo") {
		t.Fatal("an approved change is not published")
	}
	if r := call(t, approved, "fx.echo", `{"text":"again"}`); r.IsError || !bytes.Contains(r.Raw, []byte("again")) {
		t.Fatalf("calling the approved echo: %+v", r)
	}
	d, _ = w.a.Pins(ctx, "fx")
	if !slices.ContainsFunc(d.Pins, func(p toolpin.Pin) bool { return p.Tool == "echo" && p.Digest == h.Digest && p.ApprovedBy == "owner" }) {
		t.Fatalf("the approval did not re-pin echo: %+v", d.Pins)
	}
}

// An approval made by another process (the CLI, through app.Admin) reaches a running
// App at its next request: the pins moved the policy version.
func TestUpstreamApprovalFromAnotherProcess(t *testing.T) {
	ctx := context.Background()
	dir := dataDir(t)
	w := hostileWorld(t, dir, "fx")
	defer w.close(t)
	w.grant(t, "fx.*")
	w.sync(t, "fx", true, true)
	if slices.Contains(listed(t, w.turn(t)), "fx.hidden") {
		t.Fatal("hidden text published without approval")
	}
	adm, err := app.OpenAdmin(ctx, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	d, err := adm.Pins(ctx, "fx")
	if err != nil {
		t.Fatal(err)
	}
	h := holdOf(t, d, "hidden")
	if err := adm.RejectPin(ctx, "fx", "hidden", h.Digest, "owner"); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(listed(t, w.turn(t)), "fx.hidden") {
		t.Fatal("a rejected definition was published")
	}
	if err := adm.ApprovePin(ctx, "fx", "hidden", h.Digest, "owner"); err != nil {
		t.Fatal(err)
	}
	adm.Close()
	if !slices.Contains(listed(t, w.turn(t)), "fx.hidden") {
		t.Fatal("an approval from another process did not reach the running App")
	}
}

// Suspicious text: a description hiding a bidi override and tag characters is held
// by default (high findings) and its findings are audited and shown; with the policy's
// hold level "never" it is published, still flagged.
func TestUpstreamSuspiciousText(t *testing.T) {
	ctx := context.Background()
	w := hostileWorld(t, dataDir(t), "fx")
	defer w.close(t)
	w.grant(t, "fx.*")
	w.sync(t, "fx", true, true)
	d, err := w.a.Pins(ctx, "fx")
	if err != nil {
		t.Fatal(err)
	}
	var hidden *app.ToolDecision
	for i := range d.Tools {
		if d.Tools[i].Tool == "hidden" {
			hidden = &d.Tools[i]
		}
	}
	if hidden == nil || hidden.Verdict != toolpin.Pending {
		t.Fatalf("hidden: %+v", hidden)
	}
	kinds := map[textscan.Kind]string{}
	for _, f := range hidden.Findings {
		kinds[f.Kind] = f.Decoded
	}
	if _, ok := kinds[textscan.KindBidi]; !ok || !strings.Contains(kinds[textscan.KindTag], "ignore previous instructions") {
		t.Fatalf("findings of hidden: %+v", hidden.Findings)
	}
	evs, _ := w.a.Audit(ctx, audit.Filter{Tool: "fx.hidden"})
	if !slices.ContainsFunc(evs, func(e audit.Event) bool { return e.Action == "scan" && strings.Contains(e.Message, "tag") }) {
		t.Fatalf("findings not audited: %+v", evs)
	}
	n := len(evs)
	w.sync(t, "fx", true, true) // listed again: no new audit events
	if evs, _ := w.a.Audit(ctx, audit.Filter{Tool: "fx.hidden"}); len(evs) != n {
		t.Fatalf("listing the same text again wrote %d more audit events", len(evs)-n)
	}

	if err := w.a.SetTrustPolicy(ctx, store.TrustPolicy{Server: "fx", HoldAt: "never"}); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(listed(t, w.turn(t)), "fx.hidden") {
		t.Fatal("hold level never: hidden not published")
	}
	if err := w.a.SetTrustPolicy(ctx, store.TrustPolicy{Server: "fx", HoldAt: "sometimes"}); err == nil {
		t.Fatal("an unknown hold level was accepted")
	}
}

// pin "approve": every new tool waits for a person.
func TestUpstreamPinApprove(t *testing.T) {
	ctx := context.Background()
	w := hostileWorld(t, dataDir(t), "fx")
	defer w.close(t)
	w.grant(t, "fx.*")
	if err := w.a.Store().SetTrustPolicy(ctx, store.TrustPolicy{Server: "fx", Pin: "approve"}); err != nil {
		t.Fatal(err)
	}
	w.sync(t, "fx", true, true)
	if names := listed(t, w.turn(t)); len(names) != 0 {
		t.Fatalf("pin approve published %v before any approval", names)
	}
	d, _ := w.a.Pins(ctx, "fx")
	h := holdOf(t, d, "echo")
	if h.Reason != toolpin.HoldNew {
		t.Fatalf("hold of echo: %+v", h.Hold)
	}
	if err := w.a.ApprovePin(ctx, "fx", "echo", h.Digest, "owner"); err != nil {
		t.Fatal(err)
	}
	if names := listed(t, w.turn(t)); !slices.Equal(names, []string{"fx.echo"}) {
		t.Fatalf("after approving echo: %v", names)
	}
}

// Hints are not authority: an untrusted server's tool claiming readOnlyHint is still
// an execute call, which a read grant does not cover; once the owner marks the server
// trusted its annotations decide (read for readOnlyHint, write otherwise).
func TestUpstreamAnnotationsAreNotAuthority(t *testing.T) {
	ctx := context.Background()
	w := hostileWorld(t, dataDir(t), "fx")
	defer w.close(t)
	if _, err := w.a.Store().AddGrant(ctx, policy.Grant{Principal: app.DefaultPrincipal, Tool: "fx.*", Action: "read", Effect: policy.Allow}); err != nil {
		t.Fatal(err)
	}
	w.sync(t, "fx", true, true)
	tr := w.turn(t)
	if r := call(t, tr, "fx.wipe", `{}`); codeOf(r) != "no_matching_grant" {
		t.Fatalf("untrusted wipe (readOnlyHint true) under a read grant: %+v", r)
	}
	if err := w.a.SetTrustPolicy(ctx, store.TrustPolicy{Server: "fx", Trusted: true}); err != nil {
		t.Fatal(err)
	}
	tr = w.turn(t)
	if r := call(t, tr, "fx.wipe", `{}`); r.IsError {
		t.Fatalf("trusted wipe under a read grant: %+v", r)
	}
	if r := call(t, tr, "fx.echo", `{"text":"x"}`); codeOf(r) != "no_matching_grant" {
		t.Fatalf("trusted echo (no readOnlyHint) under a read grant: %+v", r)
	}
	evs, _ := w.a.Audit(ctx, audit.Filter{Tool: "fx.wipe", Principal: app.DefaultPrincipal})
	var actions []string
	for _, e := range evs {
		actions = append(actions, e.Action)
	}
	if !slices.Equal(actions, []string{"execute", "read"}) {
		t.Fatalf("audited actions of wipe: %v", actions)
	}
}

// Shadowing: fx's tool b_echo would be published by toolgate mcp as
// toolgate_fx_b_echo, the name of server fx_b's echo. The newcomer is refused with a
// diagnostic naming both; fx_b.echo keeps its name and works, and fx's other tools too.
func TestUpstreamShadowing(t *testing.T) {
	w := hostileWorld(t, dataDir(t), "fx_b", "fx")
	defer w.close(t)
	w.grant(t, "fx.*")
	w.grant(t, "fx_b.*")
	w.sync(t, "fx_b", true, true)
	w.sync(t, "fx", true, true)
	tr := w.turn(t)
	names := listed(t, tr)
	if slices.Contains(names, "fx.b_echo") || !slices.Contains(names, "fx_b.echo") || !slices.Contains(names, "fx.echo") {
		t.Fatalf("catalogue: %v", names)
	}
	var diag string
	for _, u := range w.a.UpstreamTools() {
		for _, d := range u.Diagnostics {
			if d.RawName == "b_echo" && d.Refused {
				diag = d.Message
			}
		}
	}
	if !strings.Contains(diag, "fx.b_echo") || !strings.Contains(diag, "fx_b.echo") {
		t.Fatalf("diagnostic: %q", diag)
	}
	if r := call(t, tr, "fx_b.echo", `{"text":"kept"}`); r.IsError {
		t.Fatalf("fx_b.echo: %+v", r)
	}
}
