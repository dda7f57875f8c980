package app

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/mcpconfig"
	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/textscan"
	"github.com/toolgate/toolgate/internal/toolpin"
	"github.com/toolgate/toolgate/internal/upstreamtools"
)

// Upstream trust (docs/trust.md): every catalogue SyncUpstream is given is first
// reconciled with the server's pins (internal/toolpin) and scanned
// (internal/textscan); only the definitions the pins publish reach the kernel, and a
// held one's calls are refused tool_quarantined even on turns opened before it changed.

// trustTimeout bounds one server's reconciliation with the store.
const trustTimeout = 10 * time.Second

// The principal and transport of the audit events the trust layer writes itself (a
// pin, a hold raised, findings): nobody asked for them, the catalogue did.
const (
	trustPrincipal = "toolgate"
	trustTransport = "upstream"
)

// trust is the App's per-server trust state.
type trust struct {
	mu      sync.Mutex // guards servers; never held across I/O
	servers map[string]*serverTrust
}

// serverTrust is one server's.
type serverTrust struct {
	// serial orders one server's reconciliations and publications: toolpin.Reconcile
	// must not run twice at once for a server, and the publication that follows must
	// be of the reconciliation just made. It is held across that server's store reads
	// and writes (nothing else waits on it but the next sync of the same server).
	serial sync.Mutex
	// gate is what the last reconciliation decided, for the calls of turns opened
	// before it: replaced whole each time, read per call.
	gate atomic.Pointer[callGate]
	// items is what it decided of the server's resources, templates and prompts, for
	// the relay (passthrough.go): replaced whole each time, read per request.
	items atomic.Pointer[itemGate]

	mu       sync.Mutex // guards the fields below; never held across I/O
	stored   string     // storedTrust right after the last reconciliation
	last     *toolpin.Report
	policy   store.TrustPolicy
	findings map[string]string // raw name → fingerprint of the findings last audited
}

func (a *App) trustFor(server string) *serverTrust {
	a.ut.tr.mu.Lock()
	defer a.ut.tr.mu.Unlock()
	if a.ut.tr.servers == nil {
		a.ut.tr.servers = map[string]*serverTrust{}
	}
	ts := a.ut.tr.servers[server]
	if ts == nil {
		ts = &serverTrust{findings: map[string]string{}}
		ts.gate.Store(&callGate{})
		ts.items.Store(&itemGate{})
		a.ut.tr.servers[server] = ts
	}
	return ts
}

// callGate is the set of raw names whose current definitions are published; a call of
// any other name (held, refused because it cannot be pinned, no longer listed) is
// refused, whatever catalogue the calling turn was opened with.
type callGate struct {
	published map[string]bool
	why       map[string]string // raw name → why it is not published, when known
}

// admit is what a server's tools ask before each call.
func (ts *serverTrust) admit(server string) func(raw string) error {
	return func(raw string) error {
		g := ts.gate.Load()
		if g.published[raw] {
			return nil
		}
		why, ok := g.why[raw]
		if !ok {
			why = "the server no longer lists a definition of it that toolgate can publish"
		}
		return kernel.Denied(kernel.CodeToolQuarantined, "server %q, tool %q: %s; the owner decides with `toolgate pins show|approve|reject %s`",
			server, textscan.Escape(raw, 200), why, server).WithRetryable(false)
	}
}

// itemGate is the set of pin names (toolpin.Kind.PinName) of a server's resources,
// resource templates and prompts whose current definitions are published: the relay
// lists only these, and refuses a read or get of any other item the server lists.
type itemGate struct {
	// published maps the pin name of each published item to the bytes it was listed
	// with: an item whose bytes in the host's catalogue are not these (the catalogue
	// moved on and has not been reconciled yet) is not relayed.
	published map[string][]byte
	why       map[string]string // pin name → why it is not published
	// heldTemplates: some resource template of the server is not published, so a read
	// of a URI no listed resource has (one a template would make) is refused: which
	// template it came from cannot be told.
	heldTemplates bool
}

// publishes reports whether raw, the item of kind k with this key as the host's
// catalogue lists it now, is the one the pins published.
func (g *itemGate) publishes(k toolpin.Kind, key string, raw json.RawMessage) bool {
	p, ok := g.published[k.PinName(key)]
	return ok && bytes.Equal(p, raw)
}

// admitItem is nil when the item of kind k with this key, listed now as raw, is
// published, else the refusal of a read or get of it.
func (a *App) admitItem(server string, k toolpin.Kind, key string, raw json.RawMessage) error {
	g := a.trustFor(server).items.Load()
	name := k.PinName(key)
	if g.publishes(k, key, raw) {
		return nil
	}
	why, ok := g.why[name]
	if !ok {
		why = "the server no longer lists a definition of it that toolgate can publish"
	}
	return quarantined(server, k, name, why)
}

// quarantined is the JSON-RPC error of a relayed request for a held item: the reason
// code tool_quarantined (docs/reason-codes.md) in its data, as a tool call's refusal
// carries it.
func quarantined(server string, k toolpin.Kind, name, why string) error {
	msg := fmt.Sprintf("%s: server %q, %s %q: %s; the owner decides with `toolgate pins show|approve|reject %s`",
		kernel.CodeToolQuarantined, server, k.Name, textscan.Escape(name, 200), why, server)
	data, _ := json.Marshal(map[string]any{"code": kernel.CodeToolQuarantined, "retryable": false})
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg, Data: data}
}

// itemKinds are the relayed catalogue's lists, each with its kind.
func itemLists(cat host.Catalog) []struct {
	kind  toolpin.Kind
	items []json.RawMessage
} {
	return []struct {
		kind  toolpin.Kind
		items []json.RawMessage
	}{{toolpin.KindResource, cat.Resources}, {toolpin.KindTemplate, cat.ResourceTemplates}, {toolpin.KindPrompt, cat.Prompts}}
}

// screenItems reconciles the server's resources, templates and prompts with their pins
// (toolpin.ReconcileKind) and stores the item gate: their decisions and raised holds
// are returned to be reported and audited with the tools'.
func screenItems(ctx context.Context, st toolpin.Store, server string, cat host.Catalog, p toolpin.Policy, at time.Time, ts *serverTrust) ([]toolpin.Decision, []toolpin.Hold, error) {
	g := &itemGate{published: map[string][]byte{}, why: map[string]string{}}
	var decisions []toolpin.Decision
	var raised []toolpin.Hold
	for _, l := range itemLists(cat) {
		// An empty list is reconciled too: the holds of items no longer listed go.
		rep, err := toolpin.ReconcileKind(ctx, st, server, l.kind, l.items, p, at)
		if err != nil {
			return nil, nil, err
		}
		for i, d := range rep.Decisions {
			switch {
			case d.Verdict.Publish():
				g.published[d.Tool] = l.items[i]
			case d.Tool != "":
				g.why[d.Tool] = d.Reason
			}
			if !d.Verdict.Publish() && l.kind.Prefix == toolpin.KindTemplate.Prefix {
				g.heldTemplates = true
			}
		}
		decisions = append(decisions, rep.Decisions...)
		raised = append(raised, rep.Raised...)
	}
	ts.items.Store(g)
	return decisions, raised, nil
}

// screened is a catalogue after the pins decided: what may be published, and how.
type screened struct {
	cat  host.Catalog // cat with only the published tool objects
	opts upstreamtools.Options
	// key identifies what was decided (the published digests and the trust policy): a
	// catalogue of the same version and digest is published again only when it moved.
	key string
	// diags are the held and refused tools, for UpstreamTools.
	diags []upstreamtools.Diagnostic
}

// ParseHoldAt reads a trust policy's hold level: "" (the default, toolpin.DefaultHoldAt),
// "never" (findings are reported, never hold), or a severity (info, low, medium, high).
func ParseHoldAt(s string) (textscan.Severity, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return toolpin.DefaultHoldAt, nil
	case "never":
		return 0, nil
	}
	sev, err := textscan.ParseSeverity(s)
	if err != nil {
		return 0, fmt.Errorf("hold-at: %q is not a severity (want info, low, medium, high or never)", s)
	}
	return sev, nil
}

// screen reconciles cat with server's pins under its trust policy and records the
// outcome: the gate its tools consult, the audit events of what is new (a pin, a
// hold raised, findings not audited before in this process). Anything that cannot be
// read or stored publishes none of the server's tools: fail closed.
func (a *App) screen(server string, cat host.Catalog, ts *serverTrust, others func() (map[string]string, []string)) screened {
	ctx, cancel := context.WithTimeout(context.Background(), trustTimeout)
	defer cancel()
	out := screened{cat: cat, opts: upstreamtools.Options{Admit: ts.admit(server)}}
	out.cat.Tools = nil
	fail := func(err error) screened {
		a.log.Error("upstream trust: publishing none of the server's tools", "server", server, "err", err)
		why := map[string]string{}
		for _, d := range rawNames(cat.Tools) {
			why[d] = "its definition could not be checked against its pin"
		}
		ts.gate.Store(&callGate{why: why})
		ts.items.Store(&itemGate{heldTemplates: true})
		ts.mu.Lock()
		ts.stored = "" // the next resync tries again
		ts.mu.Unlock()
		out.key = "failed"
		out.diags = []upstreamtools.Diagnostic{{Refused: true, Message: "trust: " + err.Error()}}
		return out
	}
	pol, _, err := a.st.TrustPolicy(ctx, server)
	if err != nil {
		return fail(err)
	}
	mode, err := toolpin.ParseMode(pol.Pin)
	if err != nil {
		return fail(err)
	}
	holdAt, err := ParseHoldAt(pol.HoldAt)
	if err != nil {
		return fail(err)
	}
	tools, namespaces := others()
	sc := textscan.New(textscan.Options{OtherTools: tools, OtherNamespaces: namespaces})
	policy, now := toolpin.Policy{Mode: mode, HoldAt: holdAt, Scanner: sc}, time.Now().UTC()
	rep, err := toolpin.Reconcile(ctx, a.st, server, cat.Tools, policy, now)
	if err != nil {
		return fail(err)
	}
	itemDecisions, itemsRaised, err := screenItems(ctx, a.st, server, cat, policy, now, ts)
	if err != nil {
		return fail(err)
	}
	out.opts.Trusted = pol.Trusted
	gate := &callGate{published: map[string]bool{}, why: map[string]string{}}
	h := sha256.New()
	fmt.Fprintf(h, "trusted=%v\n", pol.Trusted)
	for i, d := range rep.Decisions {
		switch {
		case d.Verdict.Publish():
			out.cat.Tools = append(out.cat.Tools, cat.Tools[i])
			gate.published[d.Tool] = true
			fmt.Fprintf(h, "%q %s\n", d.Tool, d.Definition.Digest)
		case d.Verdict == toolpin.Changed || d.Verdict == toolpin.Pending:
			gate.why[d.Tool] = d.Reason
			out.diags = append(out.diags, upstreamtools.Diagnostic{RawName: d.Tool, Refused: true, Message: "held: " + d.Reason})
		default:
			if d.Tool != "" {
				gate.why[d.Tool] = d.Reason
			}
			out.diags = append(out.diags, upstreamtools.Diagnostic{RawName: d.Tool, Refused: true, Message: d.Reason})
		}
	}
	out.key = hex.EncodeToString(h.Sum(nil))
	ts.gate.Store(gate)
	stored, err := storedTrust(ctx, a.st, server)
	if err != nil {
		stored = "" // the next resync reconciles again
	}
	// Details and the audit report the items with the tools.
	all := &toolpin.Report{Server: server, Decisions: append(slices.Clip(rep.Decisions), itemDecisions...),
		Raised: append(slices.Clip(rep.Raised), itemsRaised...), Vanished: rep.Vanished}
	ts.mu.Lock()
	ts.last, ts.policy, ts.stored = all, pol, stored
	ts.mu.Unlock()
	a.auditScreen(ctx, server, all, ts)
	return out
}

// storedTrust digests what the store holds that decides server's publication: its
// policy, its pins and its holds (not when they were last seen). A resync whose
// digest is the one recorded after the last reconciliation has nothing to do: the
// policy version moved for something else (a grant, another server's pin).
func storedTrust(ctx context.Context, st *store.Store, server string) (string, error) {
	pol, _, err := st.TrustPolicy(ctx, server)
	if err != nil {
		return "", err
	}
	pins, err := st.Pins(ctx, server)
	if err != nil {
		return "", err
	}
	holds, err := st.Holds(ctx, server)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %v\n", pol.Pin, pol.HoldAt, pol.Trusted)
	for _, p := range pins {
		fmt.Fprintf(h, "pin %q %s %q\n", p.Tool, p.Digest, p.ApprovedBy)
	}
	for _, x := range holds {
		fmt.Fprintf(h, "hold %q %s %s %s\n", x.Tool, x.Digest, x.State, x.Reason)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// auditScreen writes what a reconciliation found that is news: each tool pinned on
// first use, each hold raised, and each tool's findings when they differ from those
// last audited in this process (so a server that keeps listing the same text does
// not fill the audit; a restart audits them once more).
func (a *App) auditScreen(ctx context.Context, server string, rep *toolpin.Report, ts *serverTrust) {
	var evs []audit.Event
	ev := func(raw, action string, d audit.Decision, code kernel.Code, msg string) audit.Event {
		return audit.Event{CallID: trustEventID(), Principal: trustPrincipal, Transport: trustTransport,
			Tool: server + "." + upstreamtools.Normalize(raw), Action: action, Resource: "mcp:" + server,
			Decision: d, Code: string(code), Message: clipText(msg, 2000)}
	}
	for _, d := range rep.Decisions {
		if d.Verdict == toolpin.New {
			evs = append(evs, ev(d.Tool, "pin", audit.Allowed, "", "pinned on first use: "+d.Definition.Digest))
		}
	}
	for _, h := range rep.Raised {
		evs = append(evs, ev(h.Tool, "pin", audit.Denied, kernel.CodeToolQuarantined,
			fmt.Sprintf("held (%s) for the owner to decide: %s", h.Reason, h.Digest)))
	}
	ts.mu.Lock()
	for _, d := range rep.Decisions {
		if d.Tool == "" {
			continue
		}
		fp := fingerprint(d.Findings)
		if ts.findings[d.Tool] == fp {
			continue
		}
		ts.findings[d.Tool] = fp
		if len(d.Findings) == 0 {
			continue
		}
		msgs := make([]string, 0, len(d.Findings))
		for _, f := range d.Findings {
			msgs = append(msgs, f.String())
		}
		evs = append(evs, ev(d.Tool, "scan", audit.Allowed, "", fmt.Sprintf("%d finding(s), highest %s: %s",
			len(d.Findings), textscan.Max(d.Findings), strings.Join(msgs, "; "))))
	}
	ts.mu.Unlock()
	for i := range evs {
		if err := a.st.AppendAudit(ctx, &evs[i]); err != nil {
			a.log.Error("upstream trust: writing an audit event", "server", server, "err", err)
			return
		}
	}
}

func fingerprint(fs []textscan.Finding) string {
	if len(fs) == 0 {
		return ""
	}
	b, _ := json.Marshal(fs)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func trustEventID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return "pin-" + hex.EncodeToString(b[:])
}

// rawNames is the name of each listed tool that has a string one.
func rawNames(items []json.RawMessage) []string {
	var out []string
	for _, it := range items {
		var v struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(it, &v) == nil && v.Name != "" {
			out = append(out, v.Name)
		}
	}
	return out
}

// resyncTrust reconciles every published server's current catalogue again: the pins,
// holds or trust policies may have changed in another process (an approval from the
// CLI), which moved the policy version. A server whose decisions did not change is
// not published again.
func (a *App) resyncTrust() {
	u := &a.ut
	u.mu.Lock()
	names := make([]string, 0, len(u.servers))
	for n := range u.servers {
		names = append(names, n)
	}
	u.mu.Unlock()
	for _, n := range names {
		a.resyncServer(n)
	}
}

// resyncServer publishes server's last catalogue again under the pins as they are now,
// unless they are as the last reconciliation left them (storedTrust).
func (a *App) resyncServer(name string) {
	ts := a.trustFor(name)
	ts.serial.Lock()
	defer ts.serial.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), trustTimeout)
	fp, err := storedTrust(ctx, a.st, name)
	cancel()
	ts.mu.Lock()
	same := err == nil && fp != "" && fp == ts.stored
	ts.mu.Unlock()
	if same {
		return
	}
	u := &a.ut
	u.mu.Lock()
	st := u.servers[name]
	var server UpstreamServer
	var cat host.Catalog
	if st != nil {
		server, cat = st.server, st.cat
	}
	u.mu.Unlock()
	if st == nil {
		return // removed meanwhile
	}
	a.syncUpstream(server, cat, ts)
}

// TrustDetails is what toolgate knows of one server's trust: its policy, its pins, the
// definitions held for the owner (with the difference from the pin), and, in a process
// that publishes the server's tools, what the last listing decided tool by tool. It is
// what `toolgate pins ls|show` prints and what mcp/server/details shows.
type TrustDetails struct {
	Server string            `json:"server"`
	Policy store.TrustPolicy `json:"policy"`
	Pins   []toolpin.Pin     `json:"pins"`
	Holds  []HeldTool        `json:"holds"`
	// Tools is the last listing's decisions (verdicts, reasons, findings); nil in a
	// process that has not reconciled the server (the CLI without a daemon).
	Tools []ToolDecision `json:"tools,omitempty"`
}

// HeldTool is a held definition and, when it differs from a pin, the difference.
type HeldTool struct {
	toolpin.Hold
	Diff *toolpin.Diff `json:"diff,omitempty"`
}

// ToolDecision is one listed tool's verdict.
type ToolDecision struct {
	Tool      string             `json:"tool"`
	Verdict   toolpin.Verdict    `json:"verdict"`
	Reason    string             `json:"reason"`
	Digest    string             `json:"digest,omitempty"`
	Findings  []textscan.Finding `json:"findings,omitempty"`
	LooksLike string             `json:"looks_like,omitempty"`
}

// trustDetails reads a server's trust state from the store.
func trustDetails(ctx context.Context, st *store.Store, server string) (*TrustDetails, error) {
	pol, _, err := st.TrustPolicy(ctx, server)
	if err != nil {
		return nil, err
	}
	pins, err := st.Pins(ctx, server)
	if err != nil {
		return nil, err
	}
	holds, err := st.Holds(ctx, server)
	if err != nil {
		return nil, err
	}
	out := &TrustDetails{Server: server, Policy: pol, Pins: pins}
	if pins == nil {
		out.Pins = []toolpin.Pin{}
	}
	out.Holds = []HeldTool{}
	for _, h := range holds {
		ht := HeldTool{Hold: h}
		if i := slices.IndexFunc(pins, func(p toolpin.Pin) bool { return p.Tool == h.Tool }); i >= 0 && pins[i].Digest != h.Digest {
			if d, err := toolpin.Compare(pins[i].Canonical, h.Canonical); err == nil {
				ht.Diff = &d
			}
		}
		out.Holds = append(out.Holds, ht)
	}
	return out, nil
}

// Pins reports server's trust (TrustDetails) with, for a server this process
// publishes, the last listing's decisions. The management protocol's
// mcp/server/details calls it.
func (a *App) Pins(ctx context.Context, server string) (*TrustDetails, error) {
	d, err := trustDetails(ctx, a.st, server)
	if err != nil {
		return nil, err
	}
	a.ut.tr.mu.Lock()
	ts := a.ut.tr.servers[server]
	a.ut.tr.mu.Unlock()
	if ts == nil {
		return d, nil
	}
	ts.mu.Lock()
	rep := ts.last
	ts.mu.Unlock()
	if rep == nil {
		return d, nil
	}
	d.Tools = []ToolDecision{}
	for _, x := range rep.Decisions {
		td := ToolDecision{Tool: x.Tool, Verdict: x.Verdict, Reason: x.Reason, Findings: x.Findings, LooksLike: x.LooksLike}
		if x.Definition != nil {
			td.Digest = x.Definition.Digest
		}
		d.Tools = append(d.Tools, td)
	}
	return d, nil
}

// ErrNoDigest is returned by an approval or rejection that does not name the digest of
// the definition the person reviewed.
var ErrNoDigest = errors.New("name the digest of the definition you reviewed (--digest, shown by `toolgate pins show`)")

// decidePin approves or rejects (server, tool)'s held definition with this digest and
// audits the decision.
func decidePin(ctx context.Context, st *store.Store, server, tool, digest, by string, approve bool) error {
	if digest == "" {
		return ErrNoDigest
	}
	now := time.Now().UTC()
	ev := audit.Event{CallID: trustEventID(), Principal: by, Transport: "cli", Tool: server + "." + upstreamtools.Normalize(tool),
		Action: "pin", Resource: "mcp:" + server, Decision: audit.Allowed}
	if approve {
		if _, err := toolpin.ApproveHold(ctx, st, server, tool, digest, by, now); err != nil {
			return err
		}
		ev.Message = "approved " + digest
	} else {
		if _, err := toolpin.RejectHold(ctx, st, server, tool, digest, by, now); err != nil {
			return err
		}
		ev.Decision, ev.Code, ev.Message = audit.Denied, string(kernel.CodeToolQuarantined), "rejected "+digest
	}
	return st.AppendAudit(ctx, &ev)
}

// ApprovePin makes the held definition of (server, tool) with digest its pin (approved
// by `by`) and publishes it at once in this process; every other process publishes it
// at its next request (the policy version moved). Never reachable from an MCP tool.
func (a *App) ApprovePin(ctx context.Context, server, tool, digest, by string) error {
	if err := decidePin(ctx, a.st, server, tool, digest, by, true); err != nil {
		return err
	}
	a.resyncServer(server)
	return nil
}

// RejectPin records that `by` refused the held definition; the tool stays hidden.
func (a *App) RejectPin(ctx context.Context, server, tool, digest, by string) error {
	return decidePin(ctx, a.st, server, tool, digest, by, false)
}

// SetTrustPolicy stores server's trust policy (pin mode, hold level, trusted) after
// checking it, and publishes the server again under it.
func (a *App) SetTrustPolicy(ctx context.Context, p store.TrustPolicy) error {
	if err := setTrustPolicy(ctx, a.st, p); err != nil {
		return err
	}
	a.resyncServer(p.Server)
	return nil
}

func setTrustPolicy(ctx context.Context, st *store.Store, p store.TrustPolicy) error {
	m, err := toolpin.ParseMode(p.Pin)
	if err != nil {
		return err
	}
	if _, err := ParseHoldAt(p.HoldAt); err != nil {
		return err
	}
	p.Pin, p.HoldAt = string(m), strings.ToLower(strings.TrimSpace(p.HoldAt))
	return st.SetTrustPolicy(ctx, p)
}

// ForgetTrust deletes server's pins, holds and trust policy: what mcp/uninstall must
// call (a reinstall starts trust over). RemoveUpstream does not, so that no other path
// that unpublishes a server can wipe the pins a rug pull would be caught by.
func (a *App) ForgetTrust(ctx context.Context, server string) error {
	a.ut.tr.mu.Lock()
	delete(a.ut.tr.servers, server)
	a.ut.tr.mu.Unlock()
	return a.st.DeleteServer(ctx, server)
}

// Pins is TrustDetails from the store alone (no process state): `toolgate pins`.
func (m *Admin) Pins(ctx context.Context, server string) (*TrustDetails, error) {
	return trustDetails(ctx, m.st, server)
}

// Holds lists every held definition of every server.
func (m *Admin) Holds(ctx context.Context) ([]toolpin.Hold, error) { return m.st.Holds(ctx, "") }

// ApprovePin approves a held definition (App.ApprovePin); the processes publishing the
// server pick it up at their next request.
func (m *Admin) ApprovePin(ctx context.Context, server, tool, digest, by string) error {
	return decidePin(ctx, m.st, server, tool, digest, by, true)
}

// RejectPin rejects a held definition (App.RejectPin).
func (m *Admin) RejectPin(ctx context.Context, server, tool, digest, by string) error {
	return decidePin(ctx, m.st, server, tool, digest, by, false)
}

// TrustPolicy returns server's trust policy (the defaults when none was set).
func (m *Admin) TrustPolicy(ctx context.Context, server string) (store.TrustPolicy, error) {
	p, _, err := m.st.TrustPolicy(ctx, server)
	return p, err
}

// SetTrustPolicy stores server's trust policy (App.SetTrustPolicy).
func (m *Admin) SetTrustPolicy(ctx context.Context, p store.TrustPolicy) error {
	return setTrustPolicy(ctx, m.st, p)
}

// TrustPolicy is a server's trust policy (store.TrustPolicy), for the commands.
type TrustPolicy = store.TrustPolicy

// publicationDiagnostics are, by raw name, why this process did not publish a tool of
// server (held, refused, shadowing: UpstreamTools), for details: a refusal shown where
// the owner looks, not only in the log.
func (a *App) publicationDiagnostics(server string) map[string][]mgmt.Diagnostic {
	var out map[string][]mgmt.Diagnostic
	for _, u := range a.UpstreamTools() {
		if u.Server.Name != server {
			continue
		}
		for _, d := range u.Diagnostics {
			if !d.Refused {
				continue
			}
			if out == nil {
				out = map[string][]mgmt.Diagnostic{}
			}
			out[d.RawName] = append(out[d.RawName], mgmt.Diagnostic{Path: "tools." + textscan.Escape(d.RawName, 200),
				Severity: mcpconfig.Error, Message: "not published: " + d.Message})
		}
	}
	return out
}
