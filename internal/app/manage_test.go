package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// hookLog records what the app handed to the kernel side's hooks.
type hookLog struct {
	mu      sync.Mutex
	changes []hookCall
	removed []string
}

type hookCall struct {
	st    app.UpstreamServerState
	tools int
	ver   uint64
}

func (h *hookLog) change(st app.UpstreamServerState, c host.Catalog) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.changes = append(h.changes, hookCall{st, len(c.Tools), c.Version})
}

func (h *hookLog) remove(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removed = append(h.removed, name)
}

func (h *hookLog) last() (hookCall, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.changes) == 0 {
		return hookCall{}, 0
	}
	return h.changes[len(h.changes)-1], len(h.changes)
}

func quickHost(o *host.Options) {
	o.StopTimeout = 5 * time.Second
	o.Health.Interval = -1
	o.Restart.InitialInterval = 20 * time.Millisecond
	o.Restart.MaxInterval = 100 * time.Millisecond
	o.Catalog.Debounce = 10 * time.Millisecond
}

func openManaged(t *testing.T, dir string) *app.App {
	t.Helper()
	a, err := app.Open(context.Background(), app.Options{DataDir: dir, HostOptions: quickHost})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// fixtureConfig is an mcpServers document running the fixture as name, with marker in
// its argv and canary as a secret in its env.
func fixtureConfig(t *testing.T, name, marker, canary string) string {
	t.Helper()
	doc := map[string]any{"mcpServers": map[string]any{name: map[string]any{
		"command": upstreamtest.Fixture(t), "args": []string{"-marker", marker},
		"env": map[string]string{"FIXTURE_TOKEN": canary},
	}}}
	b, _ := json.Marshal(doc)
	return string(b)
}

var owner = mgmt.Caller{Principal: "default", Owner: true}

// managed opens an App over a fresh private data directory (dir), closed when the test
// ends, and returns it with its Manager behind mgmt.Checked.
func managed(t *testing.T) (a *app.App, m mgmt.Manager, dir string) {
	t.Helper()
	dir = testenv.PrivateDir(t)
	a = openManaged(t, dir)
	t.Cleanup(func() { a.Close() })
	return a, mgmt.Checked(a), dir
}

func waitState(t *testing.T, a *app.App, name string, want host.State) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, ok, err := a.Upstreams().Status(context.Background(), name)
		if err == nil && ok && st.State == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("server %q: state %q (known %v, %v), want %q", name, st.State, ok, err, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestManageLifecycle installs the fixture upstream through the Manager and follows it
// through a call, details, a policy change, a restart and an uninstall, checking the
// store, the audit trail, the process table and the kernel side's hooks at each step.
func TestManageLifecycle(t *testing.T) {
	hooks := &hookLog{}
	defer app.SetUpstreamHooks(func(*app.App) (func(app.UpstreamServerState, host.Catalog), func(string)) {
		return hooks.change, hooks.remove
	})()
	a, m, dir := managed(t)
	ctx := context.Background()
	marker := upstreamtest.Marker(t)
	canary := "tgcanary-" + marker

	var notes []mgmt.Notification
	var nmu sync.Mutex
	stop, _ := m.Subscribe(func(n mgmt.Notification) { nmu.Lock(); notes = append(notes, n); nmu.Unlock() })
	defer stop()

	res, err := m.Install(ctx, owner, mgmt.InstallParams{ConfigJSON: fixtureConfig(t, "fx", marker, canary)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != mgmt.InstallOK || len(res.Servers) != 1 || res.Servers[0].Status != mgmt.ServerInstalled || res.Audit.EventsWritten != 1 {
		t.Fatalf("install: %+v", res)
	}
	srv := res.Servers[0].Server
	if srv.ID != "mcp_000000000000000001" || srv.Policy.Enabled != true || srv.Policy.AllowImplicitInvocation ||
		(srv.Runtime.State != "not_started" && srv.Runtime.State != "starting") {
		t.Fatalf("installed server %+v", srv)
	}
	if ref := srv.Transport.Env["FIXTURE_TOKEN"].SecretRef; !strings.HasPrefix(ref, "sec_") {
		t.Fatalf("env shown as %+v, want a secret ref", srv.Transport.Env)
	}
	if got, n := hooks.last(); n == 0 || got.st.Name != "fx" || !got.st.Enabled || got.st.Implicit {
		t.Fatalf("install reached the kernel side as %+v (%d calls)", got, n)
	}
	evs, _ := a.Audit(ctx, audit.Filter{Tool: app.AuditInstall})
	if len(evs) != 1 || evs[0].Principal != "default" || evs[0].Resource != "mcp:fx" || evs[0].Decision != audit.Allowed {
		t.Fatalf("install audit: %+v", evs)
	}
	// Re-installing the same config changes nothing and writes nothing.
	res, err = m.Install(ctx, owner, mgmt.InstallParams{ConfigJSON: fixtureConfig(t, "fx", marker, canary)})
	if err != nil || res.Servers[0].Status != mgmt.ServerUnchanged || res.Audit.EventsWritten != 0 {
		t.Fatalf("re-install: %+v %v", res, err)
	}
	// The server had no catalogue: the App fetched its first one (starting it), so
	// that its tools can be published (docs/management.md, "First catalogue").
	// A call reaches the fixture; its result bytes come back as it wrote them.
	out, err := a.Upstreams().Call(ctx, "fx", "tools/call", json.RawMessage(`{"name":"echo","arguments":{"text":"hi"}}`), host.CallOptions{})
	if err != nil || !strings.Contains(string(out), `"hi"`) {
		t.Fatalf("call: %s %v", out, err)
	}
	if n := len(upstreamtest.Processes(t, marker)); n != 1 {
		t.Fatalf("%d upstream processes, want 1", n)
	}
	waitState(t, a, "fx", host.StateReady)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if got, _ := hooks.last(); got.tools > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the catalogue never reached the kernel side")
		}
		time.Sleep(10 * time.Millisecond)
	}

	list, err := m.List(ctx, owner, mgmt.ListParams{})
	if err != nil || len(list.Servers) != 1 || list.Servers[0].Runtime.State != "ready" || !list.Servers[0].Runtime.Live || list.Servers[0].ToolsCount == 0 {
		t.Fatalf("list: %+v %v", list, err)
	}
	det, err := m.Details(ctx, owner, mgmt.DetailsParams{ServerRef: mgmt.ServerRef{Name: "fx"}})
	if err != nil {
		t.Fatal(err)
	}
	if det.Health.CatalogVersion == 0 || len(det.Catalog.Tools) == 0 || len(det.Audit) == 0 || det.Audit[0].Tool != app.AuditInstall {
		t.Fatalf("details: health %+v, %d tools, audit %+v", det.Health, len(det.Catalog.Tools), det.Audit)
	}
	var echo *mgmt.ToolSummary
	for i := range det.Catalog.Tools {
		if det.Catalog.Tools[i].Name == "echo" {
			echo = &det.Catalog.Tools[i]
		}
	}
	if echo == nil || echo.Callable != "fx.echo" || len(echo.InputSchema.Properties) == 0 {
		t.Fatalf("echo summary %+v", echo)
	}
	if err := a.RecordBinding(ctx, "fx", "fx.echo", "echo"); err != nil {
		t.Fatal(err)
	}
	if det, _ = m.Details(ctx, owner, mgmt.DetailsParams{ServerRef: mgmt.ServerRef{ServerID: srv.ID}}); len(det.RecentBindings) != 1 || det.RecentBindings[0].RawName != "echo" {
		t.Fatalf("bindings %+v", det.RecentBindings)
	}

	// Disabling stops the process and reaches the kernel side; restarting a disabled
	// server is a conflict.
	off := false
	pol, err := m.SetPolicy(ctx, owner, mgmt.PolicySetParams{ServerRef: mgmt.ServerRef{Name: "fx"}, Enabled: &off})
	if err != nil || pol.Audit.EventsWritten != 1 || pol.Server.Policy.Enabled {
		t.Fatalf("policy set: %+v %v", pol, err)
	}
	upstreamtest.WaitGone(t, marker, 10*time.Second)
	if got, _ := hooks.last(); got.st.Enabled {
		t.Fatalf("disable reached the kernel side as %+v", got)
	}
	if _, err := m.Restart(ctx, owner, mgmt.RestartParams{ServerRef: mgmt.ServerRef{Name: "fx"}}); !isCode(err, mgmt.CodeConflict) {
		t.Fatalf("restart of a disabled server: %v", err)
	}
	pol, err = m.SetPolicy(ctx, owner, mgmt.PolicySetParams{ServerRef: mgmt.ServerRef{Name: "fx"}, Enabled: &off})
	if err != nil || pol.Audit.EventsWritten != 0 {
		t.Fatalf("a policy set that changes nothing wrote %+v %v", pol, err)
	}
	on := true
	if _, err := m.SetPolicy(ctx, owner, mgmt.PolicySetParams{ServerRef: mgmt.ServerRef{Name: "fx"}, Enabled: &on, AllowImplicitInvocation: &on}); err != nil {
		t.Fatal(err)
	}
	if got, _ := hooks.last(); !got.st.Enabled || !got.st.Implicit {
		t.Fatalf("enable reached the kernel side as %+v", got)
	}
	if _, err := m.Restart(ctx, owner, mgmt.RestartParams{ServerRef: mgmt.ServerRef{Name: "fx"}}); err != nil {
		t.Fatal(err)
	}
	waitState(t, a, "fx", host.StateReady)
	if n := len(upstreamtest.Processes(t, marker)); n != 1 {
		t.Fatalf("%d processes after restart, want 1", n)
	}

	if _, err := m.Details(ctx, owner, mgmt.DetailsParams{ServerRef: mgmt.ServerRef{Name: "nope"}}); !isCode(err, mgmt.CodeUnknownServer) {
		t.Fatalf("unknown server: %v", err)
	}
	if _, err := m.List(ctx, owner, mgmt.ListParams{WorkspaceID: "ws_000000000000000042"}); !isCode(err, mgmt.CodeUnknownWorkspace) {
		t.Fatalf("unknown workspace: %v", err)
	}
	if _, err := m.Details(ctx, owner, mgmt.DetailsParams{ServerRef: mgmt.ServerRef{Name: "fx", ScopeKind: "user"}}); !isCode(err, mgmt.CodeUnknownServer) {
		t.Fatalf("wrong scope: %v", err)
	}

	un, err := m.Uninstall(ctx, owner, mgmt.UninstallParams{ServerRef: mgmt.ServerRef{Name: "fx"}})
	if err != nil || un.Server.ID != srv.ID || un.Audit.EventsWritten != 1 {
		t.Fatalf("uninstall: %+v %v", un, err)
	}
	upstreamtest.WaitGone(t, marker, 10*time.Second)
	hooks.mu.Lock()
	removed := append([]string(nil), hooks.removed...)
	hooks.mu.Unlock()
	if len(removed) != 1 || removed[0] != "fx" {
		t.Fatalf("removed hooks %v", removed)
	}
	if list, _ := m.List(ctx, owner, mgmt.ListParams{}); len(list.Servers) != 0 {
		t.Fatalf("list after uninstall: %+v", list.Servers)
	}
	// The audit trail keeps every change.
	all, _ := a.Audit(ctx, audit.Filter{Resource: "mcp:fx"})
	if len(all) != 5 {
		t.Fatalf("%d audit events about fx, want 5 (install, 2 policy, restart, uninstall)", len(all))
	}

	// Notifications: every change, in order, with growing snapshot versions.
	nmu.Lock()
	defer nmu.Unlock()
	var changes []string
	var last uint64
	for _, n := range notes {
		if c, ok := n.(*mgmt.Changed); ok {
			changes = append(changes, c.Change)
			if c.SnapshotVersion < last || c.ServerID != srv.ID {
				t.Fatalf("notification %+v after version %d", c, last)
			}
			last = c.SnapshotVersion
		}
	}
	if strings.Join(changes, ",") != "installed,policy,policy,removed" {
		t.Fatalf("mcp/changed: %v", changes)
	}
	statuses := 0
	for _, n := range notes {
		if _, ok := n.(*mgmt.StatusChanged); ok {
			statuses++
		}
	}
	if statuses == 0 {
		t.Fatal("no mcp/server/status_changed")
	}

	// snapshot_version never goes backwards across a reopen.
	before := list.SnapshotVersion
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := openManaged(t, dir)
	defer b.Close()
	l2, err := mgmt.Checked(b).List(ctx, owner, mgmt.ListParams{})
	if err != nil || l2.SnapshotVersion < before {
		t.Fatalf("snapshot version after reopen %d, before %d (%v)", l2.SnapshotVersion, before, err)
	}
}

func isCode(err error, code string) bool {
	var e *mgmt.Error
	return errors.As(err, &e) && e.Code == code
}

// TestCloseStopsUpstreams: a clean Close leaves no upstream process behind, counted by
// the marker in their argv, with several servers running.
func TestCloseStopsUpstreams(t *testing.T) {
	dir := testenv.PrivateDir(t)
	a := openManaged(t, dir)
	ctx := context.Background()
	m := mgmt.Checked(a)
	marker := upstreamtest.Marker(t)
	for i := range 3 {
		name := fmt.Sprintf("s%d", i)
		if _, err := m.Install(ctx, owner, mgmt.InstallParams{ConfigJSON: fixtureConfig(t, name, marker, "x")}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Upstreams().Call(ctx, name, "tools/call", json.RawMessage(`{"name":"echo","arguments":{"text":"x"}}`), host.CallOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(upstreamtest.Processes(t, marker)); n != 3 {
		t.Fatalf("%d processes, want 3", n)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if pids := upstreamtest.Processes(t, marker); len(pids) != 0 {
		t.Fatalf("processes left after Close: %v", pids)
	}
	// A reopened data directory answers from the persisted catalogue before anything starts.
	b := openManaged(t, dir)
	defer b.Close()
	cat, ok, err := b.Upstreams().Catalog(ctx, "s0")
	if err != nil || !ok || len(cat.Tools) == 0 {
		t.Fatalf("persisted catalogue: %d tools, %v %v", len(cat.Tools), ok, err)
	}
	if n := len(upstreamtest.Processes(t, marker)); n != 0 {
		t.Fatalf("%d processes started by reading the catalogue", n)
	}
}

// TestSecretCanary: a secret given in env and headers is found nowhere it must not be:
// the database file, the answers, the audit trail, the stderr tail the fixture leaked
// it to, the process listing.
func TestSecretCanary(t *testing.T) {
	a, m, dir := managed(t)
	ctx := context.Background()
	marker := upstreamtest.Marker(t)
	canary := "tgcanary" + strings.ReplaceAll(marker, "-", "")
	doc := fmt.Sprintf(`{"mcpServers":{"fx":{"command":%q,"args":["-marker",%q],"env":{"API_KEY":%q}},
		"remote":{"url":"https://mcp.example.invalid/mcp","headers":{"Authorization":"Bearer %s"}}}}`,
		upstreamtest.Fixture(t), marker, canary, canary)
	res, err := m.Install(ctx, owner, mgmt.InstallParams{ConfigJSON: doc})
	if err != nil || res.Status != mgmt.InstallOK {
		t.Fatalf("install: %+v %v", res, err)
	}
	var answers []any
	answers = append(answers, res)
	// The fixture's leak tool prints its environment to stdout and stderr.
	out, err := a.Upstreams().Call(ctx, "fx", "tools/call", json.RawMessage(`{"name":"env","arguments":{}}`), host.CallOptions{})
	if err != nil || !strings.Contains(string(out), canary) {
		t.Fatalf("the server did not get its secret: %v", err)
	}
	for _, pid := range upstreamtest.Processes(t, marker) {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(string(cmdline), canary) {
			t.Fatal("the canary is in the process listing")
		}
	}
	if _, err := a.Upstreams().Call(ctx, "fx", "tools/call", json.RawMessage(`{"name":"leak","arguments":{}}`), host.CallOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	for _, ref := range []mgmt.ServerRef{{Name: "fx"}, {Name: "remote"}} {
		d, err := m.Details(ctx, owner, mgmt.DetailsParams{ServerRef: ref})
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, d)
	}
	l, _ := m.List(ctx, owner, mgmt.ListParams{})
	answers = append(answers, l)
	b, _ := json.Marshal(answers)
	if strings.Contains(string(b), canary) {
		t.Fatalf("the canary is in an answer: %s", b)
	}
	evs, _ := a.Audit(ctx, audit.Filter{})
	eb, _ := json.Marshal(evs)
	if strings.Contains(string(eb), canary) {
		t.Fatal("the canary is in the audit trail")
	}
	a.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err == nil && strings.Contains(string(data), canary) {
			t.Fatalf("the canary is in %s in clear", f)
		}
	}
}

// TestPolicyReachesOtherProcesses: a policy change made through one App reaches the
// kernel side of another App on the same data directory (which relays to the first
// for its upstream servers) at its next request, though no upstream event tells it.
func TestPolicyReachesOtherProcesses(t *testing.T) {
	logs := map[*app.App]*hookLog{}
	var mu sync.Mutex
	defer app.SetUpstreamHooks(func(a *app.App) (func(app.UpstreamServerState, host.Catalog), func(string)) {
		h := &hookLog{}
		mu.Lock()
		logs[a] = h
		mu.Unlock()
		return h.change, h.remove
	})()
	dir := testenv.PrivateDir(t)
	first := openManaged(t, dir)
	defer first.Close()
	second := openManaged(t, dir)
	defer second.Close()
	ctx := context.Background()
	marker := upstreamtest.Marker(t)
	if _, err := mgmt.Checked(first).Install(ctx, owner, mgmt.InstallParams{ConfigJSON: fixtureConfig(t, "fx", marker, "x")}); err != nil {
		t.Fatal(err)
	}
	on := true
	if _, err := mgmt.Checked(first).SetPolicy(ctx, owner, mgmt.PolicySetParams{ServerRef: mgmt.ServerRef{Name: "fx"}, AllowImplicitInvocation: &on}); err != nil {
		t.Fatal(err)
	}
	turn, err := second.OpenTurn(ctx, app.TurnRequest{})
	if err != nil {
		t.Fatal(err)
	}
	turn.Close()
	mu.Lock()
	h := logs[second]
	mu.Unlock()
	if got, n := h.last(); n == 0 || got.st.Name != "fx" || !got.st.Implicit {
		t.Fatalf("the other App's kernel side has %+v (%d calls), want fx with implicit invocation", got, n)
	}
	if _, err := mgmt.Checked(first).Uninstall(ctx, owner, mgmt.UninstallParams{ServerRef: mgmt.ServerRef{Name: "fx"}}); err != nil {
		t.Fatal(err)
	}
	turn, _ = second.OpenTurn(ctx, app.TurnRequest{})
	turn.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.removed) != 1 || h.removed[0] != "fx" {
		t.Fatalf("the other App's kernel side removed %v", h.removed)
	}
}

// TestInstallHostile: what an install refuses, it refuses per entry and names the
// entry; nothing it refuses is written, and nothing a valid entry installs is lost.
func TestInstallHostile(t *testing.T) {
	_, m, _ := managed(t)
	ctx := context.Background()
	fx := upstreamtest.Fixture(t)
	res, err := m.Install(ctx, owner, mgmt.InstallParams{ScopeKind: "user", ConfigJSON: fmt.Sprintf(`{"mcpServers":{"shared":{"command":%q}}}`, fx)})
	if err != nil || res.Status != mgmt.InstallOK || res.Servers[0].Server.Scope != "user" {
		t.Fatalf("user-scope install: %+v %v", res, err)
	}
	// The same name in the workspace scope: refused for that entry only.
	doc := fmt.Sprintf(`{"mcpServers":{"shared":{"command":%q},"fine":{"command":%q},"bad\u0000name":{"command":"x"},"nocmd":{"args":["-x"]}}}`, fx, fx)
	res, err = m.Install(ctx, owner, mgmt.InstallParams{ConfigJSON: doc})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != mgmt.InstallPartial || res.Audit.EventsWritten != 1 {
		t.Fatalf("mixed install: %+v", res)
	}
	byName := map[string]mgmt.InstallServer{}
	for _, s := range res.Servers {
		byName[s.Name] = s
	}
	if s := byName["shared"]; s.Status != mgmt.ServerValidationError || len(s.Diagnostics) == 0 || !strings.Contains(s.Diagnostics[0].Message, "already installed") {
		t.Fatalf("name taken in another scope: %+v", s)
	}
	if s := byName["fine"]; s.Status != mgmt.ServerInstalled || s.Server == nil {
		t.Fatalf("the valid entry: %+v", s)
	}
	list, _ := m.List(ctx, owner, mgmt.ListParams{})
	if len(list.Servers) != 2 {
		t.Fatalf("installed: %+v", list.Servers)
	}
	// A user-scope server is visible by name in its own scope only.
	if _, err := m.Details(ctx, owner, mgmt.DetailsParams{ServerRef: mgmt.ServerRef{Name: "shared"}}); !isCode(err, mgmt.CodeUnknownServer) {
		t.Fatalf("user-scope server under scope workspace: %v", err)
	}
	if _, err := m.Details(ctx, owner, mgmt.DetailsParams{ServerRef: mgmt.ServerRef{Name: "shared", ScopeKind: "user"}}); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []string{"", "{", "[]", `{"mcpServers":[]}`, strings.Repeat("[", 100000)} {
		res, err := m.Install(ctx, owner, mgmt.InstallParams{ConfigJSON: cfg})
		if err != nil || res.Status != mgmt.InstallValidationError || res.Audit.EventsWritten != 0 {
			t.Fatalf("config %.20q: %+v %v", cfg, res, err)
		}
	}
	if l, _ := m.List(ctx, owner, mgmt.ListParams{}); len(l.Servers) != 2 {
		t.Fatalf("a refused install changed the servers: %+v", l.Servers)
	}
}

// TestRelayOnlyWithoutHost: an App that may only relay, opened when no process hosts the
// data directory's upstream servers, starts none of them (a required one included) and
// answers from the store, persisted catalogue included; with a host running, it relays.
func TestRelayOnlyWithoutHost(t *testing.T) {
	dir := testenv.PrivateDir(t)
	ctx := context.Background()
	marker := upstreamtest.Marker(t)
	doc := fmt.Sprintf(`{"mcpServers":{"fx":{"command":%q,"args":["-marker",%q],"required":true}}}`, upstreamtest.Fixture(t), marker)
	host1 := openManaged(t, dir)
	if _, err := mgmt.Checked(host1).Install(ctx, owner, mgmt.InstallParams{ConfigJSON: doc}); err != nil {
		t.Fatal(err)
	}
	waitState(t, host1, "fx", host.StateReady)
	if _, err := host1.Upstreams().RefreshCatalog(ctx, "fx"); err != nil {
		t.Fatal(err)
	}
	// With a host: the relaying App sees the live state.
	rel, err := app.Open(ctx, app.Options{DataDir: dir, Upstreams: app.UpstreamsRelayOnly})
	if err != nil {
		t.Fatal(err)
	}
	if l, err := mgmt.Checked(rel).List(ctx, owner, mgmt.ListParams{}); err != nil || l.Servers[0].Runtime.State != "ready" {
		t.Fatalf("relayed list: %+v %v", l, err)
	}
	rel.Close()
	host1.Close()
	upstreamtest.WaitGone(t, marker, 10*time.Second)

	// Without one: nothing starts, the store answers.
	a, err := app.Open(ctx, app.Options{DataDir: dir, Upstreams: app.UpstreamsRelayOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Upstreams() != nil {
		t.Fatal("a relay-only App with no host has upstream servers")
	}
	m := mgmt.Checked(a)
	l, err := m.List(ctx, owner, mgmt.ListParams{})
	if err != nil || len(l.Servers) != 1 || l.Servers[0].Runtime.State != "not_started" || l.Servers[0].ToolsCount == 0 {
		t.Fatalf("list from the store: %+v %v", l, err)
	}
	d, err := m.Details(ctx, owner, mgmt.DetailsParams{ServerRef: mgmt.ServerRef{Name: "fx"}})
	if err != nil || len(d.Catalog.Tools) == 0 || d.Health.CatalogVersion == 0 {
		t.Fatalf("details from the store: %d tools, health %+v, %v", len(d.Catalog.Tools), d.Health, err)
	}
	if r, err := m.Restart(ctx, owner, mgmt.RestartParams{ServerRef: mgmt.ServerRef{Name: "fx"}}); err != nil || r.Audit.EventsWritten != 1 {
		t.Fatalf("restart with no host: %+v %v", r, err)
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(upstreamtest.Processes(t, marker)); n != 0 {
		t.Fatalf("a relay-only App started %d processes", n)
	}
}
