package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/store"
)

// MCPStore is the installed-servers API under test (migration 0005).
type MCPStore interface {
	Store
	WorkspaceExists(ctx context.Context, id string) (bool, error)
	InsertMCPServer(ctx context.Context, m store.MCPServer) (store.MCPServer, error)
	UpdateMCPServer(ctx context.Context, m store.MCPServer) (store.MCPServer, error)
	MCPServer(ctx context.Context, id string) (store.MCPServer, error)
	MCPServerByName(ctx context.Context, name string) (store.MCPServer, error)
	ListMCPServers(ctx context.Context, ws string) ([]store.MCPServer, error)
	DeleteMCPServer(ctx context.Context, id string) error
	MCPSnapshot(ctx context.Context) (uint64, error)
	BumpMCPSnapshot(ctx context.Context) (uint64, error)
	LoadMCPCatalog(ctx context.Context, name string) (store.MCPCatalog, bool, error)
	SaveMCPCatalog(ctx context.Context, name string, c store.MCPCatalog) error
	DeleteMCPCatalog(ctx context.Context, name string) error
	RecordMCPBinding(ctx context.Context, serverID, callable, raw string, t time.Time) error
	MCPBindings(ctx context.Context, serverID string) ([]store.MCPBinding, error)
}

var _ MCPStore = (*store.Store)(nil)

// RunMCP runs the installed-servers suite. open must return a fresh, empty store.
func RunMCP(t *testing.T, open func(t *testing.T) MCPStore) {
	t.Run("Servers", func(t *testing.T) { testMCPServers(t, open(t)) })
	t.Run("ServersHostile", func(t *testing.T) { testMCPServersHostile(t, open(t)) })
	t.Run("ServersConcurrent", func(t *testing.T) { testMCPServersConcurrent(t, open(t)) })
	t.Run("Catalogs", func(t *testing.T) { testMCPCatalogs(t, open(t)) })
	t.Run("Bindings", func(t *testing.T) { testMCPBindings(t, open(t)) })
	t.Run("AuditByResource", func(t *testing.T) { testAuditByResource(t, open(t)) })
}

func server(name string) store.MCPServer {
	return store.MCPServer{WorkspaceID: store.DefaultWorkspaceID, Scope: store.ScopeWorkspace, Name: name,
		DisplayName: name, SourceKind: "config", Definition: json.RawMessage(`{"name":"` + name + `"}`),
		Enabled: true, Fingerprint: "sha256:" + name}
}

func snapshot(t *testing.T, s MCPStore) uint64 {
	t.Helper()
	v, err := s.MCPSnapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// testMCPServers: ids are sequential in the seed's shape, every change moves
// snapshot_version by one, a name is installed once per data directory, and a
// user-scope server is listed in every workspace.
func testMCPServers(t *testing.T, s MCPStore) {
	ctx := context.Background()
	if ok, err := s.WorkspaceExists(ctx, store.DefaultWorkspaceID); err != nil || !ok {
		t.Fatalf("default workspace: %v %v", ok, err)
	}
	if ok, _ := s.WorkspaceExists(ctx, "ws_000000000000000002"); ok {
		t.Fatal("a second workspace exists")
	}
	v0 := snapshot(t, s)
	p0, _ := s.PolicyVersion(ctx)
	a, err := s.InsertMCPServer(ctx, server("alpha"))
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != "mcp_000000000000000001" || a.InstalledAt.IsZero() {
		t.Fatalf("first id %q installed %v", a.ID, a.InstalledAt)
	}
	u := server("beta")
	u.Scope = store.ScopeUser
	b, err := s.InsertMCPServer(ctx, u)
	if err != nil || b.ID != "mcp_000000000000000002" {
		t.Fatalf("second: %q %v", b.ID, err)
	}
	if v := snapshot(t, s); v != v0+2 {
		t.Fatalf("snapshot after two installs = %d, want %d", v, v0+2)
	}
	dup := server("alpha")
	dup.Scope = store.ScopeUser
	if _, err := s.InsertMCPServer(ctx, dup); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("same name in another scope: %v, want ErrConflict", err)
	}
	other := server("gamma")
	other.WorkspaceID = "ws_000000000000000009"
	if _, err := s.InsertMCPServer(ctx, other); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown workspace: %v, want ErrNotFound", err)
	}
	if v := snapshot(t, s); v != v0+2 {
		t.Fatalf("refused installs moved the snapshot to %d", v)
	}
	a.Enabled, a.Implicit, a.Fingerprint = false, true, "sha256:alpha2"
	got, err := s.UpdateMCPServer(ctx, a)
	if err != nil || got.Enabled || !got.Implicit || got.Fingerprint != "sha256:alpha2" || got.Name != "alpha" {
		t.Fatalf("update: %+v %v", got, err)
	}
	if v := snapshot(t, s); v != v0+3 {
		t.Fatalf("snapshot after an update = %d, want %d", v, v0+3)
	}
	// Installs and policy changes move the policy version too (what turns publish
	// depends on them); a definition-only update does not.
	if p, _ := s.PolicyVersion(ctx); p != p0+3 {
		t.Fatalf("policy version after two installs and a policy change = %d, want %d", p, p0+3)
	}
	a = got
	a.Fingerprint = "sha256:alpha3"
	if _, err := s.UpdateMCPServer(ctx, a); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.PolicyVersion(ctx); p != p0+3 {
		t.Fatalf("a definition-only update moved the policy version to %d", p)
	}
	v0++
	byName, err := s.MCPServerByName(ctx, "beta")
	if err != nil || byName.ID != b.ID || byName.Scope != store.ScopeUser {
		t.Fatalf("by name: %+v %v", byName, err)
	}
	list, err := s.ListMCPServers(ctx, store.DefaultWorkspaceID)
	if err != nil || len(list) != 2 || list[0].Name != "alpha" || list[1].Name != "beta" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if list, _ := s.ListMCPServers(ctx, "ws_000000000000000009"); len(list) != 1 || list[0].Name != "beta" {
		t.Fatalf("another workspace sees %+v, want only the user-scope server", list)
	}
	if err := s.DeleteMCPServer(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMCPServer(ctx, a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := s.MCPServer(ctx, a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted server read: %v", err)
	}
	if v := snapshot(t, s); v != v0+4 {
		t.Fatalf("snapshot after an uninstall = %d, want %d", v, v0+4)
	}
	// Ids never repeat: a reinstall gets a new one.
	again, err := s.InsertMCPServer(ctx, server("alpha"))
	if err != nil || again.ID != "mcp_000000000000000003" {
		t.Fatalf("reinstall: %q %v", again.ID, err)
	}
	bumped, err := s.BumpMCPSnapshot(ctx)
	if err != nil || bumped != v0+6 || snapshot(t, s) != bumped {
		t.Fatalf("bump: %d %v", bumped, err)
	}
}

func testMCPServersHostile(t *testing.T, s MCPStore) {
	ctx := context.Background()
	for name, mut := range map[string]func(*store.MCPServer){
		"empty name":     func(m *store.MCPServer) { m.Name = "" },
		"NUL in name":    func(m *store.MCPServer) { m.Name = "a\x00b" },
		"bad scope":      func(m *store.MCPServer) { m.Scope = "global" },
		"bad workspace":  func(m *store.MCPServer) { m.WorkspaceID = "ws_1" },
		"not JSON":       func(m *store.MCPServer) { m.Definition = json.RawMessage(`{`) },
		"no definition":  func(m *store.MCPServer) { m.Definition = nil },
		"newline title":  func(m *store.MCPServer) { m.DisplayName = "a\nb" },
		"no fingerprint": func(m *store.MCPServer) { m.Fingerprint = "" },
	} {
		m := server("hostile")
		mut(&m)
		if _, err := s.InsertMCPServer(ctx, m); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := s.MCPServer(ctx, "mcp_1' OR '1'='1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("hostile id: %v", err)
	}
	if _, err := s.MCPServerByName(ctx, "' OR 1=1 --"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("hostile name: %v", err)
	}
	if _, err := s.UpdateMCPServer(ctx, server("nobody")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update of nothing: %v", err)
	}
}

// testMCPServersConcurrent: concurrent installs of distinct names get distinct ids;
// of one name, exactly one wins.
func testMCPServersConcurrent(t *testing.T, s MCPStore) {
	ctx := context.Background()
	const n = 8
	var wg sync.WaitGroup
	ids := make([]string, n)
	errs := make([]error, 2*n)
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			m, err := s.InsertMCPServer(ctx, server(fmt.Sprintf("s%d", i)))
			ids[i], errs[i] = m.ID, err
		}()
		go func() {
			defer wg.Done()
			_, errs[n+i] = s.InsertMCPServer(ctx, server("same"))
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range n {
		if errs[i] != nil || seen[ids[i]] {
			t.Fatalf("install %d: %q %v", i, ids[i], errs[i])
		}
		seen[ids[i]] = true
	}
	won := 0
	for _, err := range errs[n:] {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrConflict):
			t.Fatalf("racing install: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d installs of one name won, want 1", won)
	}
}

// testMCPCatalogs: the raw items survive byte for byte, a save for an uninstalled
// server stores nothing, and an uninstall drops the catalogue.
func testMCPCatalogs(t *testing.T, s MCPStore) {
	ctx := context.Background()
	m, err := s.InsertMCPServer(ctx, server("cat"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.LoadMCPCatalog(ctx, "cat"); ok || err != nil {
		t.Fatalf("empty load: %v %v", ok, err)
	}
	raw := json.RawMessage(`{"name":"t","n":1.50,"big":12345678901234567890,"x":{"$schema":"u"} }`)
	c := store.MCPCatalog{Version: 3, Digest: "sha256:d", Info: json.RawMessage(`{"protocolVersion":"2025-06-18"}`),
		Tools: []json.RawMessage{raw, json.RawMessage(`{"name":"u"}`)}, Prompts: []json.RawMessage{json.RawMessage(`{"name":"p"}`)},
		Truncated: true, Dropped: 2, FetchedAt: time.Now().UTC().Truncate(time.Microsecond)}
	v0 := snapshot(t, s)
	if err := s.SaveMCPCatalog(ctx, "cat", c); err != nil {
		t.Fatal(err)
	}
	if v := snapshot(t, s); v != v0+1 {
		t.Fatalf("a catalogue save moved the snapshot to %d, want %d", v, v0+1)
	}
	if err := s.SaveMCPCatalog(ctx, "cat", c); err != nil {
		t.Fatal(err)
	}
	if v := snapshot(t, s); v != v0+1 {
		t.Fatalf("saving the same version moved the snapshot to %d", v)
	}
	got, ok, err := s.LoadMCPCatalog(ctx, "cat")
	if err != nil || !ok {
		t.Fatalf("load: %v %v", ok, err)
	}
	if string(got.Tools[0]) != string(raw) || len(got.Tools) != 2 || len(got.Resources) != 0 || len(got.Prompts) != 1 {
		t.Fatalf("tools %s, resources %d, prompts %d", got.Tools, len(got.Resources), len(got.Prompts))
	}
	if got.Version != 3 || got.Digest != "sha256:d" || !got.Truncated || got.Dropped != 2 || !got.FetchedAt.Equal(c.FetchedAt) ||
		string(got.Info) != string(c.Info) {
		t.Fatalf("catalogue %+v", got)
	}
	bad := c
	bad.Tools = []json.RawMessage{json.RawMessage(`{"name":`)}
	if err := s.SaveMCPCatalog(ctx, "cat", bad); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("broken item: %v", err)
	}
	if err := s.SaveMCPCatalog(ctx, "nobody", c); err != nil {
		t.Fatalf("save for an uninstalled server: %v", err)
	}
	if _, ok, _ := s.LoadMCPCatalog(ctx, "nobody"); ok {
		t.Fatal("a catalogue was kept for a server that is not installed")
	}
	if err := s.DeleteMCPServer(ctx, m.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.LoadMCPCatalog(ctx, "cat"); ok {
		t.Fatal("the catalogue survived the uninstall")
	}
	if err := s.DeleteMCPCatalog(ctx, "cat"); err != nil {
		t.Fatal(err)
	}
}

func testMCPBindings(t *testing.T, s MCPStore) {
	ctx := context.Background()
	m, err := s.InsertMCPServer(ctx, server("b"))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().UTC().Truncate(time.Microsecond)
	for i := range store.MaxBindings + 10 {
		if err := s.RecordMCPBinding(ctx, m.ID, fmt.Sprintf("b.t%03d", i), fmt.Sprintf("t-%d", i), t0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RecordMCPBinding(ctx, m.ID, "b.t070", "t-70", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	bs, err := s.MCPBindings(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != store.MaxBindings {
		t.Fatalf("%d bindings kept, want %d", len(bs), store.MaxBindings)
	}
	if bs[0].Callable != "b.t070" || !bs[0].LastSeen.Equal(t0.Add(time.Hour)) || !bs[0].FirstSeen.Equal(t0.Add(70*time.Second)) {
		t.Fatalf("most recent %+v", bs[0])
	}
	if bs[len(bs)-1].Callable != "b.t010" {
		t.Fatalf("oldest kept %q, want b.t010", bs[len(bs)-1].Callable)
	}
	if err := s.RecordMCPBinding(ctx, "mcp_000000000000000099", "x.y", "y", t0); err != nil {
		t.Fatalf("binding of an uninstalled server: %v", err)
	}
	if err := s.RecordMCPBinding(ctx, m.ID, "x\x00", "y", t0); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("NUL callable: %v", err)
	}
}

// testAuditByResource: a server's recent audit events are read by resource, newest
// N in ascending order.
func testAuditByResource(t *testing.T, s MCPStore) {
	ctx := context.Background()
	at := time.Now().UTC()
	for i := range 6 {
		e := event(i, "p", "toolgate.mcp_install", audit.Allowed, at)
		e.Resource = "mcp:x"
		if i%2 == 1 {
			e.Resource = "mcp:y"
		}
		if err := s.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := s.ListAudit(ctx, audit.Filter{Resource: "mcp:x", Limit: 2, Last: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Seq >= evs[1].Seq || evs[1].Seq != 5 {
		t.Fatalf("last two of mcp:x: %+v", evs)
	}
}
