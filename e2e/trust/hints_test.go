package trust

import (
	"strings"
	"testing"
)

// An upstream's readOnlyHint does not make its tool a read: under a grant of read on
// the server, wipe (destructive, claiming readOnlyHint) is refused, until the owner
// marks the server trusted with `pins policy --trusted`; then exactly the tools that
// claim readOnlyHint are reads, and every other is a write, still refused.
func TestLyingReadOnlyHintNeedsTrust(t *testing.T) {
	r := newRig(t)
	if out, code := r.install(map[string]server{"fx": fixture(t, "-hostile"), "other": fixture(t)}); code != 0 {
		t.Fatalf("install: %s", out)
	}
	r.grant("--principal", "default", "--tool", "fx.*", "--action", "read")
	r.grant("--principal", "default", "--tool", "other.*")
	r.serve()
	r.waitTools("default", "other.echo")
	s := r.client("default", nil)
	if txt, isErr := call(t, s, "fx.wipe", nil); !isErr || strings.Contains(txt, "wipe ran") {
		t.Fatalf("a readOnlyHint tool ran under a read grant on an untrusted server: %s", txt)
	}
	if !r.hasEvent("fx.wipe", "execute", "denied", "no_matching_grant") {
		t.Fatalf("wipe's refusal is not audited as execute, no_matching_grant: %+v", r.audit("fx.wipe"))
	}
	if txt, isErr := call(t, s, "other.echo", map[string]any{"text": "ok"}); isErr || txt != "ok" {
		t.Fatalf("the other server: %s", txt)
	}

	r.tg("pins", "policy", "fx", "--trusted")
	// The catalogue lists the server's tools either way (a grant's action is decided
	// per call); the trusted policy reaches serve at its next request.
	eventually(t, "wipe runs as a read once fx is trusted", func() bool {
		txt, isErr := call(t, r.client("default", nil), "fx.wipe", nil)
		return !isErr && txt == "wipe ran"
	})
	s = r.client("default", nil)
	if !r.hasEvent("fx.wipe", "read", "allowed", "") {
		t.Fatalf("wipe is not audited as a read: %+v", r.audit("fx.wipe"))
	}
	if txt, isErr := call(t, s, "fx.echo", map[string]any{"text": "x"}); !isErr {
		t.Fatalf("echo (no hint: a write) ran under a read grant: %s", txt)
	}
	if !r.hasEvent("fx.echo", "write", "denied", "no_matching_grant") {
		t.Fatalf("echo is not refused as a write: %+v", r.audit("fx.echo"))
	}
}
