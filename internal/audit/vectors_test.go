package audit_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
)

// The vectors below were computed once (and checked against an independent
// implementation of the encoding docs/audit.md describes) and are frozen: an audit trail written by any
// earlier build verifies only while ComputeHash and HashArgs encode exactly as they did.
// A change to either encoding must fail here (and must come with a new hashDomain and a
// way to verify old trails), never silently re-baseline these literals.

// vectorEvent is a fully populated event, hostile strings included: a NUL byte, a
// separator-looking string, invalid UTF-8 and non-ASCII text.
func vectorEvent() audit.Event {
	return audit.Event{
		Seq:           42,
		Time:          time.Date(2026, 11, 29, 12, 34, 56, 789012000, time.UTC),
		CallID:        "call-0123456789abcdef",
		TurnID:        "turn-fedcba9876543210",
		Principal:     "alice",
		Transport:     "http",
		Tool:          "local.read_file",
		Alias:         "mcp__toolgate__local_read_file",
		Action:        "read",
		Resource:      "path:docs/ä.md",
		Decision:      audit.Allowed,
		GrantID:       "g_7",
		Code:          "",
		Message:       "a\x00b|c\xff",
		LatencyMicros: 1234,
		Args:          map[string]string{"path": "00ff", "limit": "abcd"},
	}
}

// vectorEvent2 is a sparse event: empty strings and no arguments.
func vectorEvent2() audit.Event {
	return audit.Event{
		Seq:       1,
		Time:      time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		CallID:    "c",
		Principal: "p",
		Tool:      "t",
		Decision:  audit.Denied,
		Code:      "no_matching_grant",
	}
}

func TestComputeHashFrozenVectors(t *testing.T) {
	e := vectorEvent()
	if got, want := audit.ComputeHash("", &e), "fc1bd01ec93878cfbc2d3bfc90cfa557f372bc14cd042c3f6c5e958311c42e1b"; got != want {
		t.Errorf("ComputeHash(full event) = %s, want %s: the chain encoding changed", got, want)
	}
	e2 := vectorEvent2()
	prev := "x"
	if got, want := audit.ComputeHash(prev, &e2), "c6fc41453677497a67a8db670b298db4957fc8bd8520af962830988114c146c9"; got != want {
		t.Errorf("ComputeHash(sparse event) = %s, want %s: the chain encoding changed", got, want)
	}
	// The time is hashed in UTC at microsecond width: the same instant in another zone
	// hashes alike.
	e.Time = e.Time.In(time.FixedZone("x", 3600))
	if got := audit.ComputeHash("", &e); got != "fc1bd01ec93878cfbc2d3bfc90cfa557f372bc14cd042c3f6c5e958311c42e1b" {
		t.Errorf("ComputeHash depends on the time zone: %s", got)
	}
}

func TestHashArgsFrozenVectors(t *testing.T) {
	key := []byte("toolgate-test-key-0123456789abcdef")
	var args map[string]any
	// Arguments as the kernel holds them: decoded with UseNumber, so numbers keep
	// their text.
	dec := json.NewDecoder(strings.NewReader(`{"path":"docs/a.md","n":1.50,"big":12345678901234567890,"list":["a","b"],"obj":{"z":1,"a":"<&>"}}`))
	dec.UseNumber()
	if err := dec.Decode(&args); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"path": "b0f7f55aca17472ef9e64bfbd5399550bb19f6b94228ed6ea33d40dd813753f9",
		"n":    "d532414d2d152b217050bf1f6165c6838ebf9ecbf9cbebce48ba7d5a06720285",
		"big":  "32cfe36e0d2a3b850cfcb70bcea50be9836007ff7f52f5b930ee1802553882b8",
		"list": "2506042cdbee1d22fc0f41e30027e47268f63db4ff708d07419036376aa37c80",
		"obj":  "b95dae134752569a51fd6be10c7a526988093c4b0c7da9d8b9cf1fcbcdd99e18",
	}
	got := audit.HashArgs(key, args)
	for k, w := range want {
		if got[k] != w {
			t.Errorf("HashArgs[%q] = %s, want %s: the argument HMAC encoding changed", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("HashArgs returned %d values, want %d", len(got), len(want))
	}
	if got, want := audit.HashValue(key, []byte(`"docs/a.md"`)), "b0f7f55aca17472ef9e64bfbd5399550bb19f6b94228ed6ea33d40dd813753f9"; got != want {
		t.Errorf("HashValue = %s, want %s", got, want)
	}
}
