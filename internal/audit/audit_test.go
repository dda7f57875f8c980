package audit_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
)

// chain builds n correctly chained events the way the log does.
func chain(n int) []audit.Event {
	var out []audit.Event
	prev := ""
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for i := 1; i <= n; i++ {
		e := audit.Event{Seq: int64(i), Time: t0.Add(time.Duration(i) * time.Second), CallID: fmt.Sprintf("c%d", i),
			Principal: "alice", Tool: "files.read", Action: "read", Resource: "path:a", Decision: audit.Allowed,
			GrantID: "g_1", LatencyMicros: int64(i), Args: map[string]string{"path": "ab", "mode": "cd"}, PrevHash: prev}
		e.Hash = audit.ComputeHash(prev, &e)
		prev = e.Hash
		out = append(out, e)
	}
	return out
}

func wantBreak(t *testing.T, name string, evs []audit.Event, seq int64, reason string) {
	t.Helper()
	err := audit.Verify(evs)
	var ce *audit.ChainError
	if !errors.As(err, &ce) {
		t.Errorf("%s: Verify = %v, want a *ChainError", name, err)
		return
	}
	if ce.Seq != seq || !strings.Contains(ce.Reason, reason) {
		t.Errorf("%s: Verify = %v, want seq %d and %q", name, err, seq, reason)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("seq %d", seq)) {
		t.Errorf("%s: message %q does not name seq %d", name, err, seq)
	}
}

func TestVerify(t *testing.T) {
	if err := audit.Verify(chain(10)); err != nil {
		t.Fatalf("intact chain: %v", err)
	}
	if err := audit.Verify(nil); err != nil {
		t.Errorf("empty chain: %v", err)
	}

	edits := map[string]func(e *audit.Event){
		"principal": func(e *audit.Event) { e.Principal = "mallory" },
		"decision":  func(e *audit.Event) { e.Decision = audit.Denied },
		"time":      func(e *audit.Event) { e.Time = e.Time.Add(time.Microsecond) },
		"arg value": func(e *audit.Event) { e.Args["path"] = "ff" },
		"arg added": func(e *audit.Event) { e.Args["extra"] = "00" },
		"latency":   func(e *audit.Event) { e.LatencyMicros++ },
		"message":   func(e *audit.Event) { e.Message = "x" },
		"alias":     func(e *audit.Event) { e.Alias = "mcp__x" },
		"grant":     func(e *audit.Event) { e.GrantID = "" },
	}
	for name, edit := range edits {
		evs := chain(6)
		edit(&evs[3])
		wantBreak(t, "edited "+name, evs, 4, "edited")
	}

	evs := chain(6)
	wantBreak(t, "deleted middle", append(evs[:2:2], evs[3:]...), 3, "missing")
	wantBreak(t, "deleted first", chain(6)[1:], 1, "missing")

	evs = chain(6)
	evs[2], evs[3] = evs[3], evs[2]
	wantBreak(t, "swapped pair", evs, 3, "out of order")

	// Swapping the contents but keeping seq numbers in place.
	evs = chain(6)
	evs[2].Seq, evs[3].Seq = evs[3].Seq, evs[2].Seq
	evs[2], evs[3] = evs[3], evs[2]
	wantBreak(t, "swapped content", evs, 3, "")

	// An inserted event with a valid hash of its own, renumbered to fit.
	evs = chain(6)
	ins := evs[2]
	ins.Principal = "mallory"
	ins.Hash = audit.ComputeHash(ins.PrevHash, &ins)
	evs[3].Seq = 99 // whatever follows no longer fits
	forged := append(append(append([]audit.Event{}, evs[:3]...), ins), evs[3:]...)
	wantBreak(t, "inserted", forged, 3, "out of order or duplicated")

	// A replacement that rehashes itself but not its successors.
	evs = chain(6)
	evs[2].Principal = "mallory"
	evs[2].Hash = audit.ComputeHash(evs[2].PrevHash, &evs[2])
	wantBreak(t, "rehashed replacement", evs, 4, "previous hash")

	evs = chain(3)
	evs[0].PrevHash = strings.Repeat("0", 64)
	evs[0].Hash = audit.ComputeHash(evs[0].PrevHash, &evs[0])
	wantBreak(t, "first with prev", evs, 1, "previous hash")

	evs = chain(3)
	evs = append(evs, evs[2])
	wantBreak(t, "duplicated", evs, 3, "out of order")
}

func TestComputeHashDistinguishesFields(t *testing.T) {
	// Moving bytes between adjacent fields must change the hash: the encoding is
	// length-prefixed, not concatenated.
	a := audit.Event{Principal: "ab", Tool: "c", Decision: audit.Allowed}
	b := audit.Event{Principal: "a", Tool: "bc", Decision: audit.Allowed}
	if audit.ComputeHash("", &a) == audit.ComputeHash("", &b) {
		t.Error("events differing only in field boundaries hash alike")
	}
	c := audit.Event{Args: map[string]string{"a": "bc"}}
	d := audit.Event{Args: map[string]string{"ab": "c"}}
	if audit.ComputeHash("", &c) == audit.ComputeHash("", &d) {
		t.Error("args differing only in key/value boundary hash alike")
	}
	if audit.ComputeHash("p", &a) == audit.ComputeHash("q", &a) {
		t.Error("prev hash is not covered")
	}
	// Hash and PrevHash fields themselves are not input (prev is passed explicitly).
	e := a
	e.Hash, e.PrevHash = "x", "y"
	if audit.ComputeHash("", &e) != audit.ComputeHash("", &a) {
		t.Error("ComputeHash depends on e.Hash or e.PrevHash")
	}
	// Time zone does not matter, only the instant.
	t1 := audit.Event{Time: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	t2 := audit.Event{Time: t1.Time.In(time.FixedZone("x", 3600))}
	if audit.ComputeHash("", &t1) != audit.ComputeHash("", &t2) {
		t.Error("the same instant in another zone hashes differently")
	}
	if h := audit.ComputeHash("", &a); len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
		t.Errorf("hash %q is not 64 hex characters", h)
	}
}

func TestHashArgsNeverClear(t *testing.T) {
	key := []byte("installation-key-0123456789abcdef")
	secret := "sk-live-SECRET-canary-7f3a"
	args := map[string]any{
		"token":  secret,
		"nested": map[string]any{"password": secret, "list": []any{secret, 1.5}},
		"n":      42,
		"html":   "<a&b>",
		"nil":    nil,
		"bad":    func() {},
	}
	got := audit.HashArgs(key, args)
	if len(got) != len(args) {
		t.Fatalf("HashArgs returned %d entries, want %d", len(got), len(args))
	}
	enc, _ := json.Marshal(got)
	if strings.Contains(string(enc), "SECRET") || strings.Contains(string(enc), "canary") || strings.Contains(string(enc), "<a&b>") {
		t.Fatalf("clear value in hashed args: %s", enc)
	}
	for name, h := range got {
		if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
			t.Errorf("%s: %q is not an HMAC-SHA256 hex", name, h)
		}
	}
	// Deterministic, keyed, canonical.
	again := audit.HashArgs(key, map[string]any{"token": secret, "n": 42.0})
	if again["token"] != got["token"] || again["n"] != got["n"] {
		t.Error("equal values hash differently")
	}
	if audit.HashArgs([]byte("another-key-0123456789abcdef0000"), map[string]any{"token": secret})["token"] == got["token"] {
		t.Error("the HMAC does not depend on the key")
	}
	if got["token"] != audit.HashValue(key, []byte(`"`+secret+`"`)) {
		t.Error("HashValue does not reproduce HashArgs for a known value")
	}
	if got["html"] != audit.HashValue(key, []byte(`"<a&b>"`)) {
		t.Error("canonical JSON escapes HTML")
	}
	m1 := audit.HashArgs(key, map[string]any{"m": map[string]any{"a": 1, "b": 2}})
	m2 := audit.HashArgs(key, map[string]any{"m": map[string]any{"b": 2, "a": 1}})
	if m1["m"] != m2["m"] {
		t.Error("object key order changes the hash")
	}
	if audit.HashArgs(key, nil) != nil {
		t.Error("no args should give nil")
	}
}

func FuzzVerifyNeverPanics(f *testing.F) {
	f.Add(int64(1), "", "alice", "files.read")
	f.Add(int64(-5), strings.Repeat("a", 64), "\x00", "\xff")
	f.Fuzz(func(t *testing.T, seq int64, prev, principal, tool string) {
		evs := chain(3)
		evs[1].Seq = seq
		evs[1].PrevHash = prev
		evs[1].Principal = principal
		evs[1].Tool = tool
		err := audit.Verify(evs)
		intact := seq == 2 && prev == evs[0].Hash && principal == "alice" && tool == "files.read"
		if (err == nil) != intact {
			t.Fatalf("Verify = %v for intact=%v", err, intact)
		}
	})
}

func BenchmarkComputeHash(b *testing.B) {
	e := chain(1)[0]
	b.ReportAllocs()
	for b.Loop() {
		audit.ComputeHash(e.PrevHash, &e)
	}
}
