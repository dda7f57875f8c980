package app

import (
	"errors"
	"testing"

	"github.com/toolgate/toolgate/internal/upstreamtools"
)

// A request is attributed to the one turn whose call is in flight on its connection;
// with calls of two turns on one shared connection it is nobody's.
func TestRequestOrigin(t *testing.T) {
	var f inflight
	if _, err := f.origin("fx", ""); !errors.Is(err, errNoOrigin) {
		t.Fatalf("nothing in flight: %v", err)
	}
	doneA := f.track("fx", upstreamtools.Origin{Principal: "alice", TurnID: "t1"})
	doneA2 := f.track("fx", upstreamtools.Origin{Principal: "alice", TurnID: "t1"})
	f.track("fy", upstreamtools.Origin{Principal: "carol", TurnID: "t9"})
	if o, err := f.origin("fx", ""); err != nil || o.Principal != "alice" {
		t.Fatalf("two calls of one turn: %+v %v", o, err)
	}
	doneB := f.track("fx", upstreamtools.Origin{Principal: "bob", TurnID: "t2"})
	if _, err := f.origin("fx", ""); !errors.Is(err, errManyOrigins) {
		t.Fatalf("two turns on a shared connection: %v", err)
	}
	if o, err := f.origin("fx", "t2"); err != nil || o.Principal != "bob" {
		t.Fatalf("bob's own session connection: %+v %v", o, err)
	}
	doneA()
	doneA2()
	if o, err := f.origin("fx", ""); err != nil || o.Principal != "bob" {
		t.Fatalf("after alice's calls ended: %+v %v", o, err)
	}
	doneB()
	if _, err := f.origin("fx", ""); !errors.Is(err, errNoOrigin) {
		t.Fatalf("after every call ended: %v", err)
	}
	if len(f.calls) != 1 {
		t.Fatalf("entries left: %v", f.calls)
	}
}
