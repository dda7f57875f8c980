// Package toolpintest holds an in-memory toolpin.Store for tests of code that pins
// tools, and RunStore, the behavioural suite every Store must pass (the store's
// implementation on internal/store runs it too).
package toolpintest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/textscan"
	"github.com/toolgate/toolgate/internal/toolpin"
)

// Mem is an in-memory toolpin.Store. The zero value is ready to use. Values are copied
// in and out, so a caller mutating what it got back cannot change what is stored.
type Mem struct {
	mu    sync.Mutex
	pins  map[[2]string]toolpin.Pin
	holds map[[2]string]toolpin.Hold
	// Err, when set, is returned by every method (to test failure paths).
	Err error
}

var _ toolpin.Store = (*Mem)(nil)

func clonePin(p toolpin.Pin) toolpin.Pin {
	p.Canonical = bytes.Clone(p.Canonical)
	return p
}

func cloneHold(h toolpin.Hold) toolpin.Hold {
	h.Canonical = bytes.Clone(h.Canonical)
	h.Findings = slices.Clone(h.Findings)
	return h
}

// Pin implements toolpin.Store.
func (m *Mem) Pin(_ context.Context, server, tool string) (toolpin.Pin, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Err != nil {
		return toolpin.Pin{}, false, m.Err
	}
	p, ok := m.pins[[2]string{server, tool}]
	return clonePin(p), ok, nil
}

// Pins implements toolpin.Store.
func (m *Mem) Pins(_ context.Context, server string) ([]toolpin.Pin, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Err != nil {
		return nil, m.Err
	}
	var out []toolpin.Pin
	for k, p := range m.pins {
		if k[0] == server {
			out = append(out, clonePin(p))
		}
	}
	slices.SortFunc(out, func(a, b toolpin.Pin) int { return cmp.Compare(a.Tool, b.Tool) })
	return out, nil
}

// PutPin implements toolpin.Store.
func (m *Mem) PutPin(_ context.Context, p toolpin.Pin) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Err != nil {
		return m.Err
	}
	if m.pins == nil {
		m.pins = map[[2]string]toolpin.Pin{}
	}
	k := [2]string{p.Server, p.Tool}
	m.pins[k] = clonePin(p)
	delete(m.holds, k)
	return nil
}

// PinIfAbsent implements toolpin.Store.
func (m *Mem) PinIfAbsent(ctx context.Context, p toolpin.Pin) (toolpin.Pin, bool, error) {
	m.mu.Lock()
	if m.Err != nil {
		m.mu.Unlock()
		return toolpin.Pin{}, false, m.Err
	}
	if old, ok := m.pins[[2]string{p.Server, p.Tool}]; ok {
		m.mu.Unlock()
		return clonePin(old), false, nil
	}
	if m.pins == nil {
		m.pins = map[[2]string]toolpin.Pin{}
	}
	k := [2]string{p.Server, p.Tool}
	m.pins[k] = clonePin(p)
	delete(m.holds, k)
	m.mu.Unlock()
	return clonePin(p), true, nil
}

// DeleteHoldIf implements toolpin.Store.
func (m *Mem) DeleteHoldIf(_ context.Context, server, tool, digest string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Err != nil {
		return m.Err
	}
	k := [2]string{server, tool}
	if h, ok := m.holds[k]; ok && h.Digest == digest {
		delete(m.holds, k)
	}
	return nil
}

// Hold implements toolpin.Store.
func (m *Mem) Hold(_ context.Context, server, tool string) (toolpin.Hold, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Err != nil {
		return toolpin.Hold{}, false, m.Err
	}
	h, ok := m.holds[[2]string{server, tool}]
	return cloneHold(h), ok, nil
}

// Holds implements toolpin.Store.
func (m *Mem) Holds(_ context.Context, server string) ([]toolpin.Hold, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Err != nil {
		return nil, m.Err
	}
	var out []toolpin.Hold
	for k, h := range m.holds {
		if server == "" || k[0] == server {
			out = append(out, cloneHold(h))
		}
	}
	slices.SortFunc(out, func(a, b toolpin.Hold) int {
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Tool, b.Tool))
	})
	return out, nil
}

// PutHold implements toolpin.Store.
func (m *Mem) PutHold(_ context.Context, h toolpin.Hold) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Err != nil {
		return m.Err
	}
	if m.holds == nil {
		m.holds = map[[2]string]toolpin.Hold{}
	}
	m.holds[[2]string{h.Server, h.Tool}] = cloneHold(h)
	return nil
}

// DeleteHold implements toolpin.Store.
func (m *Mem) DeleteHold(_ context.Context, server, tool string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Err != nil {
		return m.Err
	}
	delete(m.holds, [2]string{server, tool})
	return nil
}

// DeleteServer implements toolpin.Store.
func (m *Mem) DeleteServer(_ context.Context, server string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.Err != nil {
		return m.Err
	}
	for k := range m.pins {
		if k[0] == server {
			delete(m.pins, k)
		}
	}
	for k := range m.holds {
		if k[0] == server {
			delete(m.holds, k)
		}
	}
	return nil
}

// RunStore runs the behaviour every toolpin.Store must have against stores made by
// open (each subtest gets a fresh, empty one).
func RunStore(t *testing.T, open func(t *testing.T) toolpin.Store) {
	t.Run("RoundTrip", func(t *testing.T) { testRoundTrip(t, open(t)) })
	t.Run("PutPinClearsHold", func(t *testing.T) { testPutPinClearsHold(t, open(t)) })
	t.Run("Isolation", func(t *testing.T) { testIsolation(t, open(t)) })
	t.Run("Hostile", func(t *testing.T) { testHostile(t, open(t)) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, open(t)) })
	t.Run("CompareAndSet", func(t *testing.T) { testCompareAndSet(t, open(t)) })
}

// testCompareAndSet: PinIfAbsent never replaces a pin (and clears the hold when it
// pins); DeleteHoldIf deletes only the hold of that digest; of many PinIfAbsent at
// once exactly one inserts.
func testCompareAndSet(t *testing.T, st toolpin.Store) {
	ctx := context.Background()
	if err := st.PutHold(ctx, sampleHold("s", "t")); err != nil {
		t.Fatal(err)
	}
	first := samplePin("s", "t")
	got, ok, err := st.PinIfAbsent(ctx, first)
	if err != nil || !ok || !equalPin(got, first) {
		t.Fatalf("PinIfAbsent of an absent pin: %+v %v %v", got, ok, err)
	}
	if _, held, _ := st.Hold(ctx, "s", "t"); held {
		t.Error("PinIfAbsent left the tool's hold")
	}
	second := first
	second.Digest, second.Canonical = toolpin.Digest([]byte(`{"name":"t","x":2}`)), []byte(`{"name":"t","x":2}`)
	got, ok, err = st.PinIfAbsent(ctx, second)
	if err != nil || ok || !equalPin(got, first) {
		t.Fatalf("PinIfAbsent over a pin: %+v %v %v (want the first pin back, nothing inserted)", got, ok, err)
	}
	if p, _, _ := st.Pin(ctx, "s", "t"); !equalPin(p, first) {
		t.Fatalf("PinIfAbsent replaced a pin: %+v", p)
	}
	h := sampleHold("s", "u")
	if err := st.PutHold(ctx, h); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteHoldIf(ctx, "s", "u", "sha256:"+strings.Repeat("0", 64)); err != nil {
		t.Fatal(err)
	}
	if _, held, _ := st.Hold(ctx, "s", "u"); !held {
		t.Fatal("DeleteHoldIf of another digest deleted the hold")
	}
	if err := st.DeleteHoldIf(ctx, "s", "u", h.Digest); err != nil {
		t.Fatal(err)
	}
	if _, held, _ := st.Hold(ctx, "s", "u"); held {
		t.Fatal("DeleteHoldIf of the hold's digest left it")
	}
	var wg sync.WaitGroup
	var inserted atomic.Int32
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := samplePin("s", "race")
			c := fmt.Sprintf(`{"name":"race","i":%d}`, i)
			p.Digest, p.Canonical = toolpin.Digest([]byte(c)), []byte(c)
			if _, ok, err := st.PinIfAbsent(ctx, p); err != nil {
				t.Error(err)
			} else if ok {
				inserted.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := inserted.Load(); n != 1 {
		t.Fatalf("%d concurrent PinIfAbsent inserted, want exactly 1", n)
	}
}

var (
	t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Hour)
)

func samplePin(server, tool string) toolpin.Pin {
	c := []byte(fmt.Sprintf(`{"description":"d","name":%q}`, tool))
	return toolpin.Pin{Server: server, Tool: tool, Digest: toolpin.Digest(c), Canonical: c, FirstSeen: t0}
}

func sampleHold(server, tool string) toolpin.Hold {
	c := []byte(fmt.Sprintf(`{"description":"changed","name":%q}`, tool))
	return toolpin.Hold{Server: server, Tool: tool, Reason: toolpin.HoldChanged, State: toolpin.HoldPending,
		Digest: toolpin.Digest(c), Canonical: c, PinnedDigest: samplePin(server, tool).Digest,
		Findings:  []textscan.Finding{{Kind: textscan.KindInvisible, Severity: textscan.Medium, Pointer: "/description", Detail: "x", Count: 1, Excerpt: `a\u{200B}b`}},
		FirstSeen: t0, LastSeen: t1}
}

func equalPin(a, b toolpin.Pin) bool {
	return a.Server == b.Server && a.Tool == b.Tool && a.Digest == b.Digest && bytes.Equal(a.Canonical, b.Canonical) &&
		a.FirstSeen.Equal(b.FirstSeen) && a.ApprovedBy == b.ApprovedBy && a.ApprovedAt.Equal(b.ApprovedAt)
}

func equalHold(a, b toolpin.Hold) bool {
	fa, _ := json.Marshal(a.Findings)
	fb, _ := json.Marshal(b.Findings)
	return a.Server == b.Server && a.Tool == b.Tool && a.Reason == b.Reason && a.State == b.State && a.Digest == b.Digest &&
		bytes.Equal(a.Canonical, b.Canonical) && a.PinnedDigest == b.PinnedDigest && bytes.Equal(fa, fb) &&
		a.FirstSeen.Equal(b.FirstSeen) && a.LastSeen.Equal(b.LastSeen) && a.DecidedBy == b.DecidedBy && a.DecidedAt.Equal(b.DecidedAt)
}

func testRoundTrip(t *testing.T, st toolpin.Store) {
	ctx := context.Background()
	if _, ok, err := st.Pin(ctx, "s", "t"); ok || err != nil {
		t.Fatalf("empty store: Pin = %v, %v", ok, err)
	}
	if _, ok, err := st.Hold(ctx, "s", "t"); ok || err != nil {
		t.Fatalf("empty store: Hold = %v, %v", ok, err)
	}
	p := samplePin("s", "t")
	if err := st.PutPin(ctx, p); err != nil {
		t.Fatal(err)
	}
	got, ok, err := st.Pin(ctx, "s", "t")
	if err != nil || !ok || !equalPin(got, p) {
		t.Fatalf("Pin = %+v %v %v, want %+v", got, ok, err, p)
	}
	p.ApprovedBy, p.ApprovedAt = "owner", t1
	if err := st.PutPin(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := st.Pin(ctx, "s", "t"); !equalPin(got, p) {
		t.Fatalf("replaced pin = %+v, want %+v", got, p)
	}
	h := sampleHold("s", "t")
	if err := st.PutHold(ctx, h); err != nil {
		t.Fatal(err)
	}
	gh, ok, err := st.Hold(ctx, "s", "t")
	if err != nil || !ok || !equalHold(gh, h) {
		t.Fatalf("Hold = %+v %v %v, want %+v", gh, ok, err, h)
	}
	h.State, h.DecidedBy, h.DecidedAt = toolpin.HoldRejected, "owner", t1
	if err := st.PutHold(ctx, h); err != nil {
		t.Fatal(err)
	}
	if gh, _, _ := st.Hold(ctx, "s", "t"); !equalHold(gh, h) {
		t.Fatalf("replaced hold = %+v, want %+v", gh, h)
	}
	if err := st.DeleteHold(ctx, "s", "t"); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteHold(ctx, "s", "t"); err != nil {
		t.Fatalf("deleting no hold: %v", err)
	}
	if _, ok, _ := st.Hold(ctx, "s", "t"); ok {
		t.Fatal("hold survived DeleteHold")
	}
	if _, ok, _ := st.Pin(ctx, "s", "t"); !ok {
		t.Fatal("DeleteHold removed the pin")
	}
}

func testPutPinClearsHold(t *testing.T, st toolpin.Store) {
	ctx := context.Background()
	if err := st.PutHold(ctx, sampleHold("s", "t")); err != nil {
		t.Fatal(err)
	}
	if err := st.PutHold(ctx, sampleHold("s", "u")); err != nil {
		t.Fatal(err)
	}
	if err := st.PutPin(ctx, samplePin("s", "t")); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := st.Hold(ctx, "s", "t"); ok {
		t.Error("PutPin left the tool's hold")
	}
	if _, ok, _ := st.Hold(ctx, "s", "u"); !ok {
		t.Error("PutPin removed another tool's hold")
	}
}

func testIsolation(t *testing.T, st toolpin.Store) {
	ctx := context.Background()
	for _, k := range [][2]string{{"a", "t"}, {"a", "T"}, {"a", "u"}, {"b", "t"}, {"ab", "t"}} {
		if err := st.PutPin(ctx, samplePin(k[0], k[1])); err != nil {
			t.Fatal(err)
		}
		if err := st.PutHold(ctx, sampleHold(k[0], k[1])); err != nil {
			t.Fatal(err)
		}
	}
	pins, err := st.Pins(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pins {
		names = append(names, p.Tool)
	}
	if !slices.Equal(names, []string{"T", "t", "u"}) {
		t.Errorf("Pins(a) = %q, want [T t u] (exact names, sorted, no other server's)", names)
	}
	all, err := st.Holds(ctx, "")
	if err != nil || len(all) != 5 {
		t.Fatalf("Holds(\"\") = %d, %v", len(all), err)
	}
	for i := 1; i < len(all); i++ {
		if cmp.Or(cmp.Compare(all[i-1].Server, all[i].Server), cmp.Compare(all[i-1].Tool, all[i].Tool)) >= 0 {
			t.Errorf("Holds not sorted: %s/%s before %s/%s", all[i-1].Server, all[i-1].Tool, all[i].Server, all[i].Tool)
		}
	}
	if err := st.DeleteServer(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if p, _ := st.Pins(ctx, "a"); len(p) != 0 {
		t.Errorf("DeleteServer(a) left %d pins", len(p))
	}
	if h, _ := st.Holds(ctx, "a"); len(h) != 0 {
		t.Errorf("DeleteServer(a) left %d holds", len(h))
	}
	for _, s := range []string{"b", "ab"} {
		if _, ok, _ := st.Pin(ctx, s, "t"); !ok {
			t.Errorf("DeleteServer(a) removed %s's pin", s)
		}
		if _, ok, _ := st.Hold(ctx, s, "t"); !ok {
			t.Errorf("DeleteServer(a) removed %s's hold", s)
		}
	}
}

// testHostile: names and texts a stranger chooses are stored and found exactly.
func testHostile(t *testing.T, st toolpin.Store) {
	ctx := context.Background()
	for _, tool := range []string{"", "a\x00b", "'; DROP TABLE pins; --", "%", "_", "re\u0430d", "\u202eelif", string(bytes.Repeat([]byte("x"), toolpin.MaxNameBytes))} {
		p := samplePin("s", tool)
		if err := st.PutPin(ctx, p); err != nil {
			t.Fatalf("PutPin(%q): %v", tool, err)
		}
		got, ok, err := st.Pin(ctx, "s", tool)
		if err != nil || !ok || !equalPin(got, p) {
			t.Errorf("Pin(%q) = %+v %v %v", tool, got, ok, err)
		}
	}
	// LIKE-style wildcards in a server name must not match other servers.
	if err := st.PutPin(ctx, samplePin("srv", "t")); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"%", "_rv", "sr_", "SRV"} {
		if p, _ := st.Pins(ctx, s); len(p) != 0 {
			t.Errorf("Pins(%q) found %d pins of another server", s, len(p))
		}
	}
	if err := st.DeleteServer(ctx, "%"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := st.Pin(ctx, "srv", "t"); !ok {
		t.Error("DeleteServer(%) removed srv's pin")
	}
	// Returned values are copies.
	got, _, _ := st.Pin(ctx, "srv", "t")
	got.Canonical[0] = 'X'
	if again, _, _ := st.Pin(ctx, "srv", "t"); again.Canonical[0] != '{' {
		t.Error("mutating a returned pin changed the stored one")
	}
}

func testConcurrent(t *testing.T, st toolpin.Store) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 25 {
				tool := fmt.Sprintf("t%d-%d", i, j)
				if err := st.PutHold(ctx, sampleHold("s", tool)); err != nil {
					t.Error(err)
					return
				}
				if err := st.PutPin(ctx, samplePin("s", tool)); err != nil {
					t.Error(err)
					return
				}
				if _, err := st.Pins(ctx, "s"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	pins, err := st.Pins(ctx, "s")
	if err != nil || len(pins) != 200 {
		t.Fatalf("%d pins after concurrent writes, %v", len(pins), err)
	}
	if h, _ := st.Holds(ctx, "s"); len(h) != 0 {
		t.Fatalf("%d holds left after every tool was pinned", len(h))
	}
}
