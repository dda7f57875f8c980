package kernel

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/policy"
)

// NamespacePolicy is how the tools of a namespace replaced as a whole (an upstream
// server's) reach turns, besides the grants, which still decide everything.
type NamespacePolicy struct {
	// Disabled keeps every tool of the namespace out of new turns (the server's
	// policy.enabled is false); the audit event of a call names namespace_disabled.
	Disabled bool
	// ExplicitOnly publishes the namespace's tools only in a turn that selects them
	// (Selection): the server's allow_implicit_invocation is false.
	ExplicitOnly bool
}

// ReplaceNamespace makes tools the whole of namespace ns, under policy p, in one step:
// the namespace's previous tools are gone, the registry generation moves, and every
// turn opened from now on sees the new catalogue, while turns already open keep the
// one they opened with (and can still call its tools). Each tool's id must be in ns;
// the batch is compiled before anything changes and refused whole if a tool is invalid.
// A tool whose raw schema could not be compiled is registered and reported in the
// diagnostics. A namespace holding tools registered with Register (toolgate's own,
// the local tools, the control plane) cannot be replaced, and Register refuses a tool
// of a namespace replaced whole.
func (k *Kernel) ReplaceNamespace(ns string, p NamespacePolicy, tools ...*Tool) ([]Diagnostic, error) {
	if !policy.ValidNamespace(ns) || ns == "toolgate" {
		return nil, fmt.Errorf("%w: namespace %q cannot be replaced", ErrInvalidTool, clip(ns, 80))
	}
	entries := make(map[string]*entry, len(tools))
	var diags []Diagnostic
	for _, t := range tools {
		if t == nil {
			return nil, fmt.Errorf("%w: nil tool", ErrInvalidTool)
		}
		if t.Namespace() != ns {
			return nil, fmt.Errorf("%w %q: not in namespace %q", ErrInvalidTool, t.ID, ns)
		}
		if _, dup := entries[t.ID]; dup {
			return nil, fmt.Errorf("%w %q: registered twice", ErrInvalidTool, t.ID)
		}
		e, d, err := compileTool(t)
		if err != nil {
			return nil, err
		}
		if d != nil {
			diags = append(diags, *d)
		}
		entries[t.ID] = e
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, whole := k.nspol[ns]; !whole {
		// The namespace of tools registered one by one (local tools, the control plane)
		// is never replaced: a server named like it would wipe them.
		for _, id := range k.ids {
			if namespaceOf(id) == ns {
				return nil, fmt.Errorf("%w: namespace %q holds tools registered on their own (%s): it cannot be replaced", ErrInvalidTool, ns, id)
			}
		}
	}
	k.dropNamespaceLocked(ns)
	for id, e := range entries {
		k.tools[id] = e
		k.ids = append(k.ids, id)
	}
	slices.Sort(k.ids)
	k.setPolicyLocked(ns, &p)
	return diags, nil
}

// dropNamespaceLocked removes every tool of ns from the registry.
func (k *Kernel) dropNamespaceLocked(ns string) {
	k.ids = slices.DeleteFunc(k.ids, func(id string) bool {
		if namespaceOf(id) == ns {
			delete(k.tools, id)
			return true
		}
		return false
	})
}

// setPolicyLocked replaces the namespace policies with a copy in which ns has p (nil:
// none), and moves the generation: turns hold the map they opened with, never edited.
func (k *Kernel) setPolicyLocked(ns string, p *NamespacePolicy) {
	pol := make(map[string]NamespacePolicy, len(k.nspol)+1)
	for n, v := range k.nspol {
		if n != ns {
			pol[n] = v
		}
	}
	if p != nil {
		pol[ns] = *p
	}
	k.nspol = pol
	k.gen++
}

// RemoveNamespace removes every tool of ns and its NamespacePolicy (the server was
// uninstalled); it does nothing to a namespace not replaced whole. Turns already open
// keep their catalogue.
func (k *Kernel) RemoveNamespace(ns string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, whole := k.nspol[ns]; !whole {
		return
	}
	k.dropNamespaceLocked(ns)
	k.setPolicyLocked(ns, nil)
}

// The kinds of Selection, as the management protocol and turn/start write them.
const (
	SelectServer = "mcpServer"
	SelectTool   = "mcpTool"
)

// Selection brings tools of a namespace replaced with ReplaceNamespace into one turn,
// including an ExplicitOnly namespace's: every tool of Server (SelectServer), or the
// one whose RawName is RawTool (SelectTool). It selects; it grants nothing: a selected
// tool still needs a grant, and a selection of tools no grant lets the principal use is
// rejected.
type Selection struct {
	// ID and Label are the caller's, echoed in the diagnostic.
	ID, Label string
	Kind      string
	Server    string
	RawTool   string
	// ScopeKind is "workspace" (also when empty) or "user".
	ScopeKind string
}

func (s Selection) String() string {
	if s.Kind == SelectTool {
		return s.Kind + "=" + s.Server + "/" + s.RawTool
	}
	return s.Kind + "=" + s.Server
}

// MaxSelections bounds the selections of one turn; past it every one is rejected.
const MaxSelections = 256

// Reasons a selection is rejected (SelectionDiagnostic.Reason).
const (
	RejectInvalid       = "invalid"
	RejectUnknownServer = "unknown_server"
	RejectUnknownTool   = "unknown_tool"
	RejectDisabled      = "server_disabled"
	RejectNotGranted    = "not_granted"
	RejectNoTools       = "no_tools"
)

// SelectionDiagnostic says what became of one Selection when the turn opened.
type SelectionDiagnostic struct {
	Selection Selection `json:"selection"`
	Accepted  bool      `json:"accepted"`
	// Reason is one of the Reject… constants when rejected.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message"`
	// Tools are the canonical ids the selection brought into the turn.
	Tools []string `json:"tools,omitempty"`
}

// resolveSelections decides each selection against the registry (read under k.mu by
// the caller) and returns the selected tool ids and the diagnostics.
func (k *Kernel) resolveSelections(o TurnOptions, pol *policy.Set, ns map[string]bool) (map[string]bool, []SelectionDiagnostic) {
	if len(o.Selections) == 0 {
		return nil, nil
	}
	if len(o.Selections) > MaxSelections {
		return nil, []SelectionDiagnostic{{Selection: Selection{ID: "*"}, Reason: RejectInvalid,
			Message: fmt.Sprintf("%d selections given, at most %d: none applied", len(o.Selections), MaxSelections)}}
	}
	selected := map[string]bool{}
	diags := make([]SelectionDiagnostic, 0, len(o.Selections))
	for _, s := range o.Selections {
		d := SelectionDiagnostic{Selection: s}
		reject := func(reason, format string, args ...any) {
			d.Reason, d.Message = reason, fmt.Sprintf(format, args...)
		}
		np, known := k.nspol[s.Server]
		switch {
		case s.Kind != SelectServer && s.Kind != SelectTool:
			reject(RejectInvalid, "kind %q is not %s or %s", clip(s.Kind, 64), SelectServer, SelectTool)
		case s.ScopeKind != "" && s.ScopeKind != "workspace" && s.ScopeKind != "user":
			reject(RejectInvalid, "scopeKind %q is not workspace or user", clip(s.ScopeKind, 64))
		case !known:
			reject(RejectUnknownServer, "no server %q is installed", safeName(s.Server))
		case np.Disabled || (hasKey(ns, s.Server) && !ns[s.Server]):
			reject(RejectDisabled, "server %q is disabled", s.Server)
		default:
			var ids []string
			prefix := s.Server + "."
			for _, id := range k.ids {
				if !strings.HasPrefix(id, prefix) {
					continue
				}
				if s.Kind == SelectTool && k.tools[id].tool.RawName != s.RawTool {
					continue
				}
				ids = append(ids, id)
			}
			var usable []string
			for _, id := range ids {
				if pol.MayUse(o.Principal, id) {
					usable = append(usable, id)
				}
			}
			switch {
			case len(ids) == 0 && s.Kind == SelectTool:
				reject(RejectUnknownTool, "server %q has no tool %q", s.Server, safeName(s.RawTool))
			case len(ids) == 0:
				reject(RejectNoTools, "server %q publishes no tools (its catalogue is empty, or not fetched yet)", s.Server)
			case len(usable) == 0:
				reject(RejectNotGranted, "no grant lets %q use %s", o.Principal, s)
			default:
				d.Accepted, d.Tools = true, usable
				d.Message = fmt.Sprintf("%d tool(s) of server %q selected for this turn", len(usable), s.Server)
				for _, id := range usable {
					selected[id] = true
				}
			}
		}
		diags = append(diags, d)
	}
	return selected, diags
}

func hasKey(m map[string]bool, k string) bool { _, ok := m[k]; return ok }

// selectionKey is the selected ids' canonical form, for the catalogue cache.
func selectionKey(selected map[string]bool) string {
	if len(selected) == 0 {
		return ""
	}
	ids := make([]string, 0, len(selected))
	for id := range selected {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return strings.Join(ids, "\n")
}

// auditSelections records each selection's fate: an accepted one as allowed (tool
// "<server>.*", or the selected tool's id), a rejected one as denied with code
// selection_rejected and the reason in the message.
func (k *Kernel) auditSelections(ctx context.Context, t *Turn, diags []SelectionDiagnostic) error {
	for _, d := range diags {
		ev := audit.Event{CallID: newID("sel-"), TurnID: t.id, Principal: t.principal, Transport: t.transport,
			Time: k.opts.Now().UTC(), Action: "select", Tool: safeName(d.Selection.Server) + ".*"}
		if d.Selection.Kind == SelectTool && len(d.Tools) == 1 {
			ev.Tool = d.Tools[0]
		}
		if d.Accepted {
			ev.Decision, ev.Message = audit.Allowed, clip(d.Selection.String()+": "+d.Message, 500)
		} else {
			ev.Decision, ev.Code = audit.Denied, string(CodeSelectionRejected)
			ev.Message = clip(d.Selection.String()+": "+d.Reason+": "+d.Message, 500)
		}
		if err := k.opts.Audit.AppendAudit(context.WithoutCancel(ctx), &ev); err != nil {
			return err
		}
	}
	return nil
}

// SetNamespacePolicy changes the policy of a namespace replaced with ReplaceNamespace
// (a server enabled or disabled, its implicit invocation allowed or not) without
// compiling its tools again. New turns see it; open turns keep theirs. It reports
// whether ns is such a namespace.
func (k *Kernel) SetNamespacePolicy(ns string, p NamespacePolicy) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.nspol[ns]; !ok {
		return false
	}
	k.setPolicyLocked(ns, &p)
	return true
}

// IDs lists the registered tool ids, sorted.
func (k *Kernel) IDs() []string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return slices.Clone(k.ids)
}
