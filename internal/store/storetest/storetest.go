// Package storetest is the behavioural suite every store dialect must pass. A dialect's
// own test calls Run with a function that opens a fresh, empty store; the suite then
// checks grants, namespaces, keys, meta, the audit chain and escalations through the
// same API the kernel and CLI use, including hostile input and concurrent writers.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/store"
)

// Store is the API under test. *store.Store implements it.
type Store interface {
	AddGrant(ctx context.Context, g policy.Grant) (policy.Grant, error)
	ListGrants(ctx context.Context) ([]policy.Grant, error)
	RemoveGrant(ctx context.Context, id string) error
	SetNamespaceEnabled(ctx context.Context, ns string, enabled bool) error
	Namespaces(ctx context.Context) (map[string]bool, error)
	Key(ctx context.Context, name string) ([]byte, error)
	Meta(ctx context.Context, key string) (string, bool, error)
	SetMeta(ctx context.Context, key, val string) error
	AppendAudit(ctx context.Context, e *audit.Event) error
	ListAudit(ctx context.Context, f audit.Filter) ([]audit.Event, error)
	AuditHead(ctx context.Context) (seq int64, hash string, err error)
	AddEscalation(ctx context.Context, e store.Escalation) error
	ListEscalations(ctx context.Context, status string) ([]store.Escalation, error)
	ResolveEscalation(ctx context.Context, id, decision, by, note string) error
	PolicyVersion(ctx context.Context) (int64, error)
}

var _ Store = (*store.Store)(nil)

// Run runs the suite. open must return a fresh, empty store and arrange its cleanup.
func Run(t *testing.T, open func(t *testing.T) Store) {
	t.Run("Grants", func(t *testing.T) { testGrants(t, open(t)) })
	t.Run("GrantValidation", func(t *testing.T) { testGrantValidation(t, open(t)) })
	t.Run("Namespaces", func(t *testing.T) { testNamespaces(t, open(t)) })
	t.Run("Keys", func(t *testing.T) { testKeys(t, open(t)) })
	t.Run("Meta", func(t *testing.T) { testMeta(t, open(t)) })
	t.Run("AuditAppend", func(t *testing.T) { testAuditAppend(t, open(t)) })
	t.Run("AuditFilter", func(t *testing.T) { testAuditFilter(t, open(t)) })
	t.Run("AuditHostile", func(t *testing.T) { testAuditHostile(t, open(t)) })
	t.Run("AuditConcurrent", func(t *testing.T) { testAuditConcurrent(t, open(t)) })
	t.Run("AuditCancel", func(t *testing.T) { testAuditCancel(t, open(t)) })
	t.Run("Escalations", func(t *testing.T) { testEscalations(t, open(t)) })
	t.Run("PolicyVersion", func(t *testing.T) { testPolicyVersion(t, open(t)) })
}

// testPolicyVersion: every change to grants or namespace switches moves the policy
// version forward; refused changes, no-op switches and writes to anything else leave it
// alone (a long-running process would otherwise reload for nothing).
func testPolicyVersion(t *testing.T, s Store) {
	ctx := context.Background()
	cur, err := s.PolicyVersion(ctx)
	if err != nil {
		t.Fatalf("PolicyVersion: %v", err)
	}
	step := func(what string, moves bool, f func() error) {
		t.Helper()
		if err := f(); err != nil && moves {
			t.Fatalf("%s: %v", what, err)
		}
		v, err := s.PolicyVersion(ctx)
		if err != nil {
			t.Fatalf("PolicyVersion after %s: %v", what, err)
		}
		switch {
		case moves && v <= cur:
			t.Errorf("%s: policy version %d -> %d, want it to grow", what, cur, v)
		case !moves && v != cur:
			t.Errorf("%s: policy version %d -> %d, want it unchanged", what, cur, v)
		}
		cur = v
	}
	var g policy.Grant
	step("AddGrant", true, func() (err error) {
		g, err = s.AddGrant(ctx, policy.Grant{Principal: "alice", Tool: "files.read", Effect: policy.Allow})
		return err
	})
	step("AddGrant of a second grant", true, func() error {
		_, err := s.AddGrant(ctx, policy.Grant{Principal: "bob", Tool: "*", Effect: policy.Deny})
		return err
	})
	step("refused AddGrant", false, func() error {
		_, err := s.AddGrant(ctx, policy.Grant{Principal: "alice", Tool: "files.re*", Effect: policy.Allow})
		return err
	})
	step("RemoveGrant", true, func() error { return s.RemoveGrant(ctx, g.ID) })
	step("RemoveGrant of an unknown id", false, func() error { return s.RemoveGrant(ctx, g.ID) })
	step("SetNamespaceEnabled off (first switch)", true, func() error { return s.SetNamespaceEnabled(ctx, "github", false) })
	step("SetNamespaceEnabled off again", false, func() error { return s.SetNamespaceEnabled(ctx, "github", false) })
	step("SetNamespaceEnabled on", true, func() error { return s.SetNamespaceEnabled(ctx, "github", true) })
	step("refused SetNamespaceEnabled", false, func() error { return s.SetNamespaceEnabled(ctx, "Bad Name", false) })
	step("SetMeta", false, func() error { return s.SetMeta(ctx, "k", "v") })
	step("Key", false, func() error { _, err := s.Key(ctx, "token"); return err })
	step("AppendAudit", false, func() error {
		return s.AppendAudit(ctx, &audit.Event{Principal: "alice", Tool: "files.read", Decision: audit.Allowed})
	})
	step("AddEscalation", false, func() error {
		return s.AddEscalation(ctx, store.Escalation{Principal: "alice", Reason: "r"})
	})
	// Concurrent changes each move it: no two changes share a value.
	before := cur
	var wg sync.WaitGroup
	const n = 10
	for i := range n {
		wg.Go(func() {
			if _, err := s.AddGrant(ctx, policy.Grant{Principal: fmt.Sprintf("p%d", i), Tool: "*", Effect: policy.Allow}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if v, err := s.PolicyVersion(ctx); err != nil || v < before+n {
		t.Errorf("after %d concurrent AddGrant: policy version %d -> %d (%v), want at least +%d", n, before, v, err, n)
	}
}

func testGrants(t *testing.T, s Store) {
	ctx := context.Background()
	before := time.Now().Add(-time.Second)
	in := []policy.Grant{
		{Principal: "alice", Tool: "files.read", Action: "read", Resource: "path:docs/", Effect: policy.Allow, Note: "docs only"},
		{Principal: "*", Tool: "files.*", Action: "", Effect: policy.Deny},
		{Principal: "agent-ü-東京", Tool: "*", Action: "execute", Resource: "*", Effect: policy.Allow, Note: "multi\nline\tnote ✓"},
	}
	var added []policy.Grant
	for _, g := range in {
		got, err := s.AddGrant(ctx, g)
		if err != nil {
			t.Fatalf("AddGrant(%+v): %v", g, err)
		}
		if !strings.HasPrefix(got.ID, "g_") || len(got.ID) < 10 {
			t.Errorf("grant id %q: want g_ plus random", got.ID)
		}
		if got.CreatedAt.Before(before) || got.CreatedAt.After(time.Now().Add(time.Second)) {
			t.Errorf("CreatedAt %v is not now", got.CreatedAt)
		}
		want := g
		want.ID, want.CreatedAt = got.ID, got.CreatedAt
		if want.Action == "" {
			want.Action = "*"
		}
		if !grantEqual(got, want) {
			t.Errorf("AddGrant returned %+v, want %+v", got, want)
		}
		added = append(added, got)
	}
	if added[0].ID == added[1].ID {
		t.Errorf("two grants share id %s", added[0].ID)
	}
	list, err := s.ListGrants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(added) {
		t.Fatalf("ListGrants = %d grants, want %d", len(list), len(added))
	}
	for i := range added {
		if !grantEqual(list[i], added[i]) {
			t.Errorf("ListGrants[%d] = %+v, want %+v", i, list[i], added[i])
		}
	}
	if err := s.RemoveGrant(ctx, added[1].ID); err != nil {
		t.Fatalf("RemoveGrant: %v", err)
	}
	if err := s.RemoveGrant(ctx, added[1].ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second RemoveGrant = %v, want ErrNotFound", err)
	}
	if err := s.RemoveGrant(ctx, "g_nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RemoveGrant(unknown) = %v, want ErrNotFound", err)
	}
	list, err = s.ListGrants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != added[0].ID || list[1].ID != added[2].ID {
		t.Errorf("after removal ListGrants = %+v", list)
	}
}

func grantEqual(a, b policy.Grant) bool {
	ca, cb := a.CreatedAt, b.CreatedAt
	a.CreatedAt, b.CreatedAt = time.Time{}, time.Time{}
	return a == b && ca.Equal(cb)
}

func testGrantValidation(t *testing.T, s Store) {
	ctx := context.Background()
	ok := policy.Grant{Principal: "p", Tool: "files.read", Action: "read", Effect: policy.Allow}
	bad := map[string]func(g *policy.Grant){
		"empty principal":        func(g *policy.Grant) { g.Principal = "" },
		"space-padded principal": func(g *policy.Grant) { g.Principal = " p" },
		"NUL in principal":       func(g *policy.Grant) { g.Principal = "a\x00b" },
		"escape in principal":    func(g *policy.Grant) { g.Principal = "a\x1b[31mb" },
		"invalid UTF-8":          func(g *policy.Grant) { g.Principal = "\xff\xfe" },
		"huge principal":         func(g *policy.Grant) { g.Principal = strings.Repeat("p", 100000) },
		"empty tool":             func(g *policy.Grant) { g.Tool = "" },
		"tool without namespace": func(g *policy.Grant) { g.Tool = "read" },
		"partial wildcard":       func(g *policy.Grant) { g.Tool = "files.re*" },
		"wildcard namespace":     func(g *policy.Grant) { g.Tool = "*.read" },
		"empty name":             func(g *policy.Grant) { g.Tool = "files." },
		"space in tool":          func(g *policy.Grant) { g.Tool = "files.read file" },
		"NUL in tool":            func(g *policy.Grant) { g.Tool = "files.read\x00" },
		"huge tool":              func(g *policy.Grant) { g.Tool = "files." + strings.Repeat("a", 1000) },
		"unknown action":         func(g *policy.Grant) { g.Action = "delete" },
		"action case":            func(g *policy.Grant) { g.Action = "READ" },
		"empty effect":           func(g *policy.Grant) { g.Effect = "" },
		"unknown effect":         func(g *policy.Grant) { g.Effect = "maybe" },
		"NUL in resource":        func(g *policy.Grant) { g.Resource = "path:a\x00b" },
		"huge resource":          func(g *policy.Grant) { g.Resource = "path:" + strings.Repeat("a", 10000) },
		"NUL in note":            func(g *policy.Grant) { g.Note = "x\x00" },
		"huge note":              func(g *policy.Grant) { g.Note = strings.Repeat("n", 1<<20) },
	}
	for name, mutate := range bad {
		g := ok
		mutate(&g)
		got, err := s.AddGrant(ctx, g)
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: AddGrant = %+v, %v; want ErrInvalid", name, got, err)
		}
	}
	if list, err := s.ListGrants(ctx); err != nil || len(list) != 0 {
		t.Errorf("refused grants were stored: %+v, %v", list, err)
	}
	for _, tool := range []string{"*", "files.*", "files.read", "github.create_issue", "my-ns.tool.v2", "a_b.C-d"} {
		g := ok
		g.Tool = tool
		if _, err := s.AddGrant(ctx, g); err != nil {
			t.Errorf("AddGrant(tool %q) = %v, want accepted", tool, err)
		}
	}
	testGrantsThePolicyRefuses(t, s)
}

// testGrantsThePolicyRefuses: a grant the policy could not compile is refused when it
// is added, with the policy's own message, so it can never make a later turn fail
// closed. Every grant the store accepts compiles.
func testGrantsThePolicyRefuses(t *testing.T, s Store) {
	ctx := context.Background()
	before, err := s.ListGrants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ok := policy.Grant{Principal: "p", Tool: "files.read", Action: "read", Effect: policy.Allow}
	for name, tc := range map[string]struct {
		mutate  func(g *policy.Grant)
		mention string
	}{
		"dot-dot in a prefix":     {func(g *policy.Grant) { g.Resource = "path:docs/../x/" }, `write "path:x/"`},
		"dot-dot in an exact":     {func(g *policy.Grant) { g.Resource = "path:docs/../x" }, `write "path:x"`},
		"climbing prefix":         {func(g *policy.Grant) { g.Resource = "path:a/../../b/" }, "outside the workspace"},
		"dot segment":             {func(g *policy.Grant) { g.Resource = "path:./docs/" }, `write "path:docs/"`},
		"double slash":            {func(g *policy.Grant) { g.Resource = "path:docs//a" }, `write "path:docs/a"`},
		"absolute path":           {func(g *policy.Grant) { g.Resource = "path:/etc/" }, "absolute"},
		"parent of the workspace": {func(g *policy.Grant) { g.Resource = "path:../" }, "outside the workspace"},
		"workspace spelled ./":    {func(g *policy.Grant) { g.Resource = "path:./" }, `write "path:"`},
		"backslash":               {func(g *policy.Grant) { g.Resource = `path:docs\x` }, "backslash"},
		"no scheme":               {func(g *policy.Grant) { g.Resource = "docs/" }, "no scheme"},
		"upper-case namespace":    {func(g *policy.Grant) { g.Tool = "Files.read" }, "canonical id"},
		"namespace starts with -": {func(g *policy.Grant) { g.Tool = "-x.read" }, "canonical id"},
		"namespace wildcard ns":   {func(g *policy.Grant) { g.Tool = "Files.*" }, "invalid namespace"},
		"name with a colon":       {func(g *policy.Grant) { g.Tool = "files.read:write" }, "canonical id"},
	} {
		g := ok
		tc.mutate(&g)
		got, err := s.AddGrant(ctx, g)
		if !errors.Is(err, store.ErrInvalid) || !errors.Is(err, policy.ErrInvalidGrant) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%s: AddGrant = %+v, %v; want ErrInvalid and policy.ErrInvalidGrant mentioning %q", name, got, err, tc.mention)
		}
		if verr := store.ValidateGrant(g); verr == nil || verr.Error() != strings.TrimPrefix(err.Error(), "adding grant: ") {
			t.Errorf("%s: ValidateGrant = %v, AddGrant = %v; want the same refusal", name, verr, err)
		}
	}
	for _, res := range []string{"", "*", "path:", "path:docs/", "path:docs", "path:docs/a.md", "path:.git/hooks/", "url:example.com", "repo:."} {
		g := ok
		g.Resource = res
		if _, err := s.AddGrant(ctx, g); err != nil {
			t.Errorf("AddGrant(resource %q) = %v, want accepted", res, err)
		}
	}
	after, err := s.ListGrants(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before)+9 {
		t.Errorf("%d grants stored, want %d: a refused grant was stored or an accepted one lost", len(after), len(before)+9)
	}
	if _, err := policy.Compile(after); err != nil {
		t.Errorf("the grants the store accepted do not compile: %v", err)
	}
}

func testNamespaces(t *testing.T, s Store) {
	ctx := context.Background()
	got, err := s.Namespaces(ctx)
	if err != nil || len(got) != 0 {
		t.Fatalf("fresh Namespaces = %v, %v; want empty", got, err)
	}
	steps := []struct {
		ns string
		on bool
	}{{"github", false}, {"files", true}, {"github", true}, {"bash", false}, {"bash", false}}
	for _, st := range steps {
		if err := s.SetNamespaceEnabled(ctx, st.ns, st.on); err != nil {
			t.Fatalf("SetNamespaceEnabled(%s, %v): %v", st.ns, st.on, err)
		}
	}
	got, err = s.Namespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"github": true, "files": true, "bash": false}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Namespaces = %v, want %v", got, want)
	}
	for _, bad := range []string{"", "a.b", "a b", "x\x00", strings.Repeat("n", 1000), "GitHub", "-x", strings.Repeat("n", 65)} {
		if err := s.SetNamespaceEnabled(ctx, bad, false); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("SetNamespaceEnabled(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func testKeys(t *testing.T, s Store) {
	ctx := context.Background()
	var wg sync.WaitGroup
	keys := make([][]byte, 8)
	errs := make([]error, 8)
	for i := range keys {
		wg.Go(func() { keys[i], errs[i] = s.Key(ctx, "token") })
	}
	wg.Wait()
	for i := range keys {
		if errs[i] != nil {
			t.Fatalf("Key: %v", errs[i])
		}
		if len(keys[i]) != store.KeySize {
			t.Fatalf("key is %d bytes, want %d", len(keys[i]), store.KeySize)
		}
		if string(keys[i]) != string(keys[0]) {
			t.Fatalf("concurrent Key calls returned different keys")
		}
	}
	again, err := s.Key(ctx, "token")
	if err != nil || string(again) != string(keys[0]) {
		t.Errorf("Key is not stable: %x vs %x (%v)", again, keys[0], err)
	}
	other, err := s.Key(ctx, "audit")
	if err != nil || string(other) == string(keys[0]) {
		t.Errorf("different key names share a key (%v)", err)
	}
	if _, err := s.Key(ctx, ""); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Key(\"\") = %v, want ErrInvalid", err)
	}
}

func testMeta(t *testing.T, s Store) {
	ctx := context.Background()
	if v, ok, err := s.Meta(ctx, "missing"); err != nil || ok || v != "" {
		t.Errorf("Meta(missing) = %q, %v, %v", v, ok, err)
	}
	for _, v := range []string{"1", "", "ünïcødé ✓ 東京\nline two", strings.Repeat("x", 10000), "v2"} {
		if err := s.SetMeta(ctx, "k", v); err != nil {
			t.Fatalf("SetMeta(%.20q): %v", v, err)
		}
		got, ok, err := s.Meta(ctx, "k")
		if err != nil || !ok || got != v {
			t.Errorf("Meta after SetMeta(%.20q) = %.20q, %v, %v", v, got, ok, err)
		}
	}
	for name, v := range map[string]string{"NUL": "a\x00b", "huge": strings.Repeat("x", 1<<20), "bad UTF-8": "\xff"} {
		if err := s.SetMeta(ctx, "k", v); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("SetMeta(%s) = %v, want ErrInvalid", name, err)
		}
	}
	if got, _, _ := s.Meta(ctx, "k"); got != "v2" {
		t.Errorf("a refused SetMeta changed the value to %.20q", got)
	}
}

// event builds a distinguishable event.
func event(i int, principal, tool string, d audit.Decision, at time.Time) *audit.Event {
	return &audit.Event{
		Time: at, CallID: fmt.Sprintf("call-%d", i), TurnID: "turn-1", Principal: principal, Transport: "stdio",
		Tool: tool, Alias: "mcp__toolgate__" + tool, Action: "read", Resource: "path:docs/a.md", Decision: d,
		GrantID: "g_1", Code: "", Message: "", LatencyMicros: int64(i * 10),
		Args: map[string]string{"path": fmt.Sprintf("%064x", i)},
	}
}

func testAuditAppend(t *testing.T, s Store) {
	ctx := context.Background()
	if seq, hash, err := s.AuditHead(ctx); err != nil || seq != 0 || hash != "" {
		t.Errorf("empty log AuditHead = %d, %q, %v", seq, hash, err)
	}
	base := time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.UTC)
	var want []audit.Event
	for i := 1; i <= 5; i++ {
		e := event(i, "alice", "files.read", audit.Allowed, base.Add(time.Duration(i)*time.Second))
		if err := s.AppendAudit(ctx, e); err != nil {
			t.Fatalf("AppendAudit: %v", err)
		}
		if e.Seq != int64(i) {
			t.Errorf("event %d got seq %d", i, e.Seq)
		}
		if len(e.Hash) != 64 || e.Hash != audit.ComputeHash(e.PrevHash, e) {
			t.Errorf("event %d hash %q does not match its content", i, e.Hash)
		}
		if i > 1 && e.PrevHash != want[i-2].Hash {
			t.Errorf("event %d prev hash %q, want %q", i, e.PrevHash, want[i-2].Hash)
		}
		if !e.Time.Equal(base.Add(time.Duration(i) * time.Second).Truncate(time.Microsecond)) {
			t.Errorf("event time %v: want UTC truncated to microseconds", e.Time)
		}
		want = append(want, *e)
	}
	got, err := s.ListAudit(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("ListAudit = %d events, want %d", len(got), len(want))
	}
	if seq, hash, err := s.AuditHead(ctx); err != nil || seq != 5 || hash != want[4].Hash {
		t.Errorf("AuditHead = %d, %q, %v; want 5, %q", seq, hash, err, want[4].Hash)
	}
	for i := range got {
		if !eventEqual(got[i], want[i]) {
			t.Errorf("ListAudit[%d] = %+v\nwant %+v", i, got[i], want[i])
		}
	}
	if err := audit.Verify(got); err != nil {
		t.Errorf("Verify(stored chain) = %v", err)
	}
	// A zero time is set to now.
	e := &audit.Event{Principal: "p", Tool: "t.x", Decision: audit.Denied, Code: "no_matching_grant"}
	if err := s.AppendAudit(ctx, e); err != nil {
		t.Fatal(err)
	}
	if time.Since(e.Time) > time.Minute || e.Time.Location() != time.UTC {
		t.Errorf("zero time became %v, want now in UTC", e.Time)
	}
	// Refusals leave the chain untouched.
	for name, bad := range map[string]*audit.Event{
		"unknown decision": {Principal: "p", Tool: "t.x", Decision: "maybe"},
		"empty decision":   {Principal: "p", Tool: "t.x"},
		"oversized":        {Principal: "p", Tool: strings.Repeat("t", store.MaxAuditEventBytes+1), Decision: audit.Denied},
		"bad args UTF-8":   {Principal: "p", Tool: "t.x", Decision: audit.Denied, Args: map[string]string{"\xff": "00"}},
	} {
		if err := s.AppendAudit(ctx, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("AppendAudit(%s) = %v, want ErrInvalid", name, err)
		}
		if bad.Seq != 0 || bad.Hash != "" {
			t.Errorf("AppendAudit(%s) refused but set seq/hash", name)
		}
	}
	all, err := s.ListAudit(ctx, audit.Filter{})
	if err != nil || len(all) != 6 {
		t.Fatalf("after refusals: %d events, %v; want 6", len(all), err)
	}
	if err := audit.Verify(all); err != nil {
		t.Errorf("Verify after refusals: %v", err)
	}
}

func eventEqual(a, b audit.Event) bool {
	if !a.Time.Equal(b.Time) {
		return false
	}
	a.Time, b.Time = time.Time{}, time.Time{}
	if len(a.Args) == 0 {
		a.Args = nil
	}
	if len(b.Args) == 0 {
		b.Args = nil
	}
	return reflect.DeepEqual(a, b)
}

func testAuditFilter(t *testing.T, s Store) {
	ctx := context.Background()
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	specs := []struct {
		principal, tool string
		d               audit.Decision
	}{
		{"alice", "files.read", audit.Allowed},  // 1
		{"bob", "files.read", audit.Denied},     // 2
		{"alice", "bash.run", audit.Failed},     // 3
		{"alice", "files.write", audit.Allowed}, // 4
		{"bob", "toolgate.escalate", audit.Escalated},
		{"carol", "files.read", audit.Allowed}, // 6
	}
	for i, sp := range specs {
		if err := s.AppendAudit(ctx, event(i+1, sp.principal, sp.tool, sp.d, base.Add(time.Duration(i)*time.Minute))); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		f    audit.Filter
		want []int64
	}{
		{"all", audit.Filter{}, []int64{1, 2, 3, 4, 5, 6}},
		{"principal", audit.Filter{Principal: "alice"}, []int64{1, 3, 4}},
		{"tool", audit.Filter{Tool: "files.read"}, []int64{1, 2, 6}},
		{"decision", audit.Filter{Decision: "allowed"}, []int64{1, 4, 6}},
		{"call id", audit.Filter{CallID: "call-3"}, []int64{3}},
		{"after seq", audit.Filter{AfterSeq: 4}, []int64{5, 6}},
		{"since inclusive", audit.Filter{Since: base.Add(2 * time.Minute)}, []int64{3, 4, 5, 6}},
		{"until exclusive", audit.Filter{Until: base.Add(2 * time.Minute)}, []int64{1, 2}},
		{"window", audit.Filter{Since: base.Add(time.Minute), Until: base.Add(4 * time.Minute)}, []int64{2, 3, 4}},
		{"limit", audit.Filter{Limit: 2}, []int64{1, 2}},
		{"combined", audit.Filter{Principal: "alice", Decision: "allowed", AfterSeq: 1, Limit: 5}, []int64{4}},
		{"no match", audit.Filter{Principal: "mallory"}, nil},
		{"hostile value", audit.Filter{Principal: "' OR 1=1 --"}, nil},
	}
	for _, tc := range cases {
		got, err := s.ListAudit(ctx, tc.f)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		var seqs []int64
		for _, e := range got {
			seqs = append(seqs, e.Seq)
		}
		if fmt.Sprint(seqs) != fmt.Sprint(tc.want) {
			t.Errorf("%s: seqs %v, want %v", tc.name, seqs, tc.want)
		}
	}
}

func testAuditHostile(t *testing.T, s Store) {
	ctx := context.Background()
	hostile := []string{
		"nul\x00inside",
		"\xff\xfe invalid UTF-8",
		"unicode ✓ 東京 \u202e reversed",
		"newline\ninjected\nseq 99",
		"' ; DROP TABLE audit_events; --",
		strings.Repeat("big", 16000), // 48 KB in each of 11 fields
		"",
	}
	var appended []audit.Event
	for i, h := range hostile {
		e := &audit.Event{CallID: h, TurnID: h, Principal: h, Transport: h, Tool: h, Alias: h, Action: h,
			Resource: h, Decision: audit.Denied, GrantID: h, Code: h, Message: h, LatencyMicros: int64(-i),
			Args: map[string]string{"k ✓": "v", "": "empty-name"}}
		if err := s.AppendAudit(ctx, e); err != nil {
			t.Fatalf("AppendAudit(hostile %d): %v", i, err)
		}
		appended = append(appended, *e)
	}
	got, err := s.ListAudit(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(hostile) {
		t.Fatalf("%d events stored, want %d", len(got), len(hostile))
	}
	for i := range got {
		if !eventEqual(got[i], appended[i]) {
			t.Errorf("hostile event %d changed in storage: principal %.40q, want %.40q", i, got[i].Principal, appended[i].Principal)
		}
		if hostile[i] == "" {
			continue // an empty filter field does not filter
		}
		if got, _ := s.ListAudit(ctx, audit.Filter{Principal: hostile[i], Tool: hostile[i]}); len(got) != 1 {
			t.Errorf("filtering by hostile value %d found %d events, want 1", i, len(got))
		}
	}
	if err := audit.Verify(got); err != nil {
		t.Errorf("Verify(hostile chain) = %v", err)
	}
}

func testAuditConcurrent(t *testing.T, s Store) {
	ctx := context.Background()
	const workers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				e := event(i, fmt.Sprintf("worker-%d", w), "files.read", audit.Allowed, time.Time{})
				if err := s.AppendAudit(ctx, e); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent AppendAudit: %v", err)
	}
	got, err := s.ListAudit(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != workers*each {
		t.Errorf("%d events, want %d", len(got), workers*each)
	}
	if err := audit.Verify(got); err != nil {
		t.Errorf("concurrent appends broke the chain: %v", err)
	}
}

// testAuditCancel appends from many goroutines, cancelling about half of them at
// arbitrary points: an append that returned nil must be in the log and one that
// returned an error must not, and the chain stays whole.
func testAuditCancel(t *testing.T, s Store) {
	const n = 300
	var wg sync.WaitGroup
	results := make([]error, n)
	for i := range n {
		ctx, cancel := context.WithCancel(context.Background())
		if i%4 == 0 {
			cancel() // cancelled before the call
		}
		wg.Go(func() {
			defer cancel()
			if i%4 == 1 {
				go cancel() // cancelled during the call
			}
			results[i] = s.AppendAudit(ctx, &audit.Event{CallID: fmt.Sprintf("call-%d", i), Principal: "p", Tool: "t.x", Decision: audit.Allowed})
		})
	}
	wg.Wait()
	evs, err := s.ListAudit(context.Background(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.Verify(evs); err != nil {
		t.Errorf("chain: %v", err)
	}
	stored := map[string]bool{}
	for _, e := range evs {
		if stored[e.CallID] {
			t.Errorf("%s stored twice", e.CallID)
		}
		stored[e.CallID] = true
	}
	ok := 0
	for i, err := range results {
		id := fmt.Sprintf("call-%d", i)
		switch {
		case err == nil && !stored[id]:
			t.Errorf("%s: AppendAudit returned nil but the event is missing", id)
		case err != nil && stored[id]:
			t.Errorf("%s: AppendAudit returned %v but the event was written", id, err)
		case err != nil && !errors.Is(err, context.Canceled):
			t.Errorf("%s: unexpected error %v", id, err)
		case err == nil:
			ok++
		}
	}
	if ok < n/2 {
		t.Errorf("only %d of %d uncancelled appends succeeded", ok, n)
	}
}

func testEscalations(t *testing.T, s Store) {
	ctx := context.Background()
	if err := s.AddEscalation(ctx, store.Escalation{ID: "esc_1", TurnID: "turn-1", CallID: "call-1", Principal: "alice",
		Reason: "needs prod access", Note: "ticket ✓ 42\nsecond line"}); err != nil {
		t.Fatalf("AddEscalation: %v", err)
	}
	if err := s.AddEscalation(ctx, store.Escalation{ID: "esc_2", TurnID: "turn-2", Principal: "bob", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddEscalation(ctx, store.Escalation{Principal: "carol", Reason: "generated id"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddEscalation(ctx, store.Escalation{ID: "esc_1", Principal: "alice"}); err == nil {
		t.Error("AddEscalation with a duplicate id succeeded")
	}
	for name, bad := range map[string]store.Escalation{
		"no principal":     {ID: "esc_x"},
		"already decided":  {ID: "esc_y", Principal: "p", Status: "approved", Decision: "approved"},
		"NUL in reason":    {ID: "esc_z", Principal: "p", Reason: "a\x00"},
		"control in id":    {ID: "esc\x1b", Principal: "p"},
		"oversized reason": {ID: "esc_w", Principal: "p", Reason: strings.Repeat("r", 1<<20)},
	} {
		if err := s.AddEscalation(ctx, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("AddEscalation(%s) = %v, want ErrInvalid", name, err)
		}
	}
	pending, err := s.ListEscalations(ctx, "pending")
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 3 || pending[0].ID != "esc_1" || pending[0].Status != "pending" ||
		pending[0].Note != "ticket ✓ 42\nsecond line" || pending[0].DecidedAt != nil || pending[0].CreatedAt.IsZero() {
		t.Fatalf("pending escalations = %+v", pending)
	}
	if !strings.HasPrefix(pending[2].ID, "esc_") || pending[2].Principal != "carol" {
		t.Errorf("generated escalation = %+v", pending[2])
	}
	if err := s.ResolveEscalation(ctx, "esc_1", "approved", "ops@example.com", "ok for today"); err != nil {
		t.Fatalf("ResolveEscalation: %v", err)
	}
	if err := s.ResolveEscalation(ctx, "esc_1", "denied", "someone-else", ""); !errors.Is(err, store.ErrConflict) {
		t.Errorf("resolving twice = %v, want ErrConflict", err)
	}
	if err := s.ResolveEscalation(ctx, "esc_404", "denied", "ops", ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("resolving unknown = %v, want ErrNotFound", err)
	}
	for _, d := range []string{"", "pending", "APPROVED", "maybe"} {
		if err := s.ResolveEscalation(ctx, "esc_2", d, "ops", ""); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("ResolveEscalation(decision %q) = %v, want ErrInvalid", d, err)
		}
	}
	if err := s.ResolveEscalation(ctx, "esc_2", "denied", "", ""); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("ResolveEscalation with no decider = %v, want ErrInvalid", err)
	}
	if err := s.ResolveEscalation(ctx, "esc_2", "denied", "ops", "no"); err != nil {
		t.Fatal(err)
	}
	all, err := s.ListEscalations(ctx, "")
	if err != nil || len(all) != 3 {
		t.Fatalf("ListEscalations(\"\") = %d, %v", len(all), err)
	}
	e1 := all[0]
	if e1.Status != "approved" || e1.Decision != "approved" || e1.DecidedBy != "ops@example.com" ||
		e1.DecisionNote != "ok for today" || e1.DecidedAt == nil || e1.DecidedAt.Before(e1.CreatedAt) {
		t.Errorf("resolved escalation = %+v", e1)
	}
	for status, n := range map[string]int{"pending": 1, "approved": 1, "denied": 1} {
		got, err := s.ListEscalations(ctx, status)
		if err != nil || len(got) != n {
			t.Errorf("ListEscalations(%s) = %d, %v; want %d", status, len(got), err, n)
		}
	}
	if _, err := s.ListEscalations(ctx, "bogus"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("ListEscalations(bogus) = %v, want ErrInvalid", err)
	}
}
