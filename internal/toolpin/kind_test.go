package toolpin_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/toolpin"
	"github.com/toolgate/toolgate/internal/toolpin/toolpintest"
)

// Items of every kind share the store with tools, keyed so that none can meet another:
// a tool cannot take an item's pin name, and reconciling one kind leaves the others'
// pins and holds alone.
func TestKindsAreKeptApart(t *testing.T) {
	ctx := context.Background()
	st := &toolpintest.Mem{}
	at := time.Unix(0, 0).UTC()
	raw := func(s ...string) []json.RawMessage {
		var out []json.RawMessage
		for _, x := range s {
			out = append(out, json.RawMessage(x))
		}
		return out
	}
	if _, err := toolpin.ReconcileKind(ctx, st, "fx", toolpin.KindPrompt, raw(`{"name":"greet","description":"hi"}`), toolpin.Policy{}, at); err != nil {
		t.Fatal(err)
	}
	r, err := toolpin.ReconcileKind(ctx, st, "fx", toolpin.KindPrompt, raw(`{"name":"greet","description":"hi, and more"}`), toolpin.Policy{}, at)
	if err != nil || r.Decisions[0].Verdict != toolpin.Changed || r.Decisions[0].Tool != "prompt:greet" {
		t.Fatalf("a changed prompt: %+v %v", r, err)
	}
	// A tools listing neither sees the prompt's pin as vanished nor clears its hold; a
	// tool named like the pin is refused.
	r, err = toolpin.Reconcile(ctx, st, "fx", raw(`{"name":"prompt:greet","description":"hi"}`, `{"name":"greet"}`), toolpin.Policy{}, at)
	if err != nil {
		t.Fatal(err)
	}
	if r.Decisions[0].Verdict != toolpin.Refused || !strings.Contains(r.Decisions[0].Reason, "cannot start with") ||
		r.Decisions[1].Verdict != toolpin.New || len(r.Vanished) != 0 {
		t.Fatalf("tools beside a prompt's pin: %+v", r)
	}
	if _, ok, _ := st.Hold(ctx, "fx", "prompt:greet"); !ok {
		t.Fatal("a tools listing cleared the prompt's hold")
	}
	if p, ok, _ := st.Pin(ctx, "fx", "prompt:greet"); !ok || !strings.Contains(string(p.Canonical), `"hi"`) {
		t.Fatalf("the prompt's pin: %+v", p)
	}
	// Resources are keyed by uri; hostile items are refused, not pinned.
	r, err = toolpin.ReconcileKind(ctx, st, "fx", toolpin.KindResource, raw(
		`{"uri":"file:///a","name":"a"}`,
		`{"name":"no uri"}`,
		`{"uri":"file:///b","name":"b","Description":"a lookalike member"}`,
		`{"uri":"file:///c","name":5}`,
		`{"uri":"file:///d","name":"d","name":"twice"}`,
		`{"uri":"file:///e"}`, `{"uri":"file:///e","name":"again"}`,
	), toolpin.Policy{}, at)
	if err != nil {
		t.Fatal(err)
	}
	want := []toolpin.Verdict{toolpin.New, toolpin.Refused, toolpin.Refused, toolpin.Refused, toolpin.Refused, toolpin.Refused, toolpin.Refused}
	for i, d := range r.Decisions {
		if d.Verdict != want[i] {
			t.Errorf("resource %d: %s (%s), want %s", i, d.Verdict, d.Reason, want[i])
		}
	}
	if r.Decisions[0].Tool != "resource:file:///a" {
		t.Errorf("the resource's pin name: %q", r.Decisions[0].Tool)
	}
	// Under pin: approve a new item waits for a person, as a new tool does.
	r, err = toolpin.ReconcileKind(ctx, st, "fx", toolpin.KindTemplate, raw(`{"uriTemplate":"x://{id}","name":"x"}`), toolpin.Policy{Mode: toolpin.Approve}, at)
	if err != nil || r.Decisions[0].Verdict != toolpin.Pending || r.Decisions[0].Hold != toolpin.HoldNew {
		t.Fatalf("a new template under approve: %+v %v", r, err)
	}
	if k := toolpin.KindOf("template:x://{id}"); k.Name != toolpin.KindTemplate.Name {
		t.Errorf("KindOf a template pin: %+v", k)
	}
}
