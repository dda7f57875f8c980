package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/rpcwire"
)

// Outcome is how a turn has ended so far.
type Outcome string

const (
	OutcomeCompleted Outcome = "completed"
	OutcomeEscalated Outcome = "escalated"
	OutcomeFailed    Outcome = "failed"
)

// Turn is one resolved catalogue for one principal. It is safe for concurrent use, and
// it satisfies the Turn interfaces its surfaces declare (mcpserver.Turn, httpapi.Turn)
// without the kernel importing any surface: it speaks internal/mcpspec. Its catalogue is fixed when it opens; each call is decided by
// the policy it opened with and, once the grants have changed, by the current policy
// too, so a revoked grant stops an open turn at its next call.
type Turn struct {
	k         *Kernel
	id        string
	principal string
	transport string
	alias     func(string) string
	namer     func(string) string
	policy    *policy.Set
	caps      *policy.Capabilities // nil: not narrowed
	byName    map[string]*entry
	sources   []string // the catalogue's, shared: never modified
	ns        map[string]bool
	list      *mcpspec.ToolList
	// nspol, selected and selections are the namespace policies the catalogue was
	// resolved under, the tools this turn's selections brought in, and their fates.
	nspol      map[string]NamespacePolicy
	selected   map[string]bool
	selections []SelectionDiagnostic

	closed    atomic.Bool
	escalated atomic.Bool
	failed    atomic.Bool
}

// ID is the turn's execution id.
func (t *Turn) ID() string { return t.id }

// Principal is the identity whose grants decide this turn.
func (t *Turn) Principal() string { return t.principal }

// Outcome reports how the turn has ended so far.
func (t *Turn) Outcome() Outcome {
	switch {
	case t.escalated.Load():
		return OutcomeEscalated
	case t.failed.Load():
		return OutcomeFailed
	default:
		return OutcomeCompleted
	}
}

// Selections reports what became of each of the turn's selections (TurnOptions).
func (t *Turn) Selections() []SelectionDiagnostic {
	return append([]SelectionDiagnostic(nil), t.selections...)
}

// Sources lists the distinct Tool.Source values of the turn's catalogue ("toolgate",
// "workspace", upstream server names), in no particular order. The slice is shared:
// callers must not modify it.
func (t *Turn) Sources() []string { return t.sources }

// Close ends the turn; later calls are denied turn_closed.
func (t *Turn) Close() error { t.closed.Store(true); return nil }

// ListTools returns the catalogue resolved at open. It never changes.
func (t *Turn) ListTools(context.Context) (*mcpspec.ToolList, error) {
	l := *t.list
	l.Tools = append([]json.RawMessage(nil), t.list.Tools...)
	return &l, nil
}

// maxNameInMessage bounds how much of a caller-supplied name is echoed back.
const maxNameInMessage = 128

// CallTool turns one tools/call into a ToolCall: map the name, validate the arguments,
// derive and normalise the access, authorize it, audit the decision, run, and build the
// result. Refusals are results; the error return is reserved for internal failures.
func (t *Turn) CallTool(ctx context.Context, req *mcpspec.CallRequest) (*mcpspec.CallResult, error) {
	if req == nil {
		return nil, errors.New("kernel: CallTool with a nil request")
	}
	start := time.Now()
	c := &callState{t: t, start: start, ev: audit.Event{
		CallID:    newID("call-"),
		TurnID:    t.id,
		Principal: t.principal,
		Transport: t.transport,
	}}
	if t.alias != nil {
		c.ev.Alias = t.alias(req.Name)
	}
	// Every call is in the kernel's in-flight set until it returns, so that Shutdown
	// can cancel it and see its outcome written before the audit log closes.
	ctx, c.cancel = context.WithCancelCause(ctx)
	defer c.cancel(nil)
	switch t.k.calls.enter(c) {
	case drainClosed:
		t.k.log.Warn("a call arrived after shutdown; refused unrecorded", "tool", safeName(req.Name))
		return errorResult(shutdownRefusal()), nil
	case drainDraining:
		defer t.k.calls.leave(c)
		c.ev.Tool = safeName(req.Name)
		if e, ok := t.byName[req.Name]; ok {
			c.ev.Tool = e.tool.ID
		}
		return c.refuse(ctx, shutdownRefusal())
	}
	defer t.k.calls.leave(c)
	if t.closed.Load() {
		c.ev.Tool = safeName(req.Name)
		return c.refuse(ctx, Denied(CodeTurnClosed, "the turn is over; open a new one"))
	}
	if t.escalated.Load() {
		c.ev.Tool = safeName(req.Name)
		return c.refuse(ctx, Denied(CodeEscalationPending, "this turn ended by escalating to a person; nothing further runs on it").WithRetryable(false))
	}
	e, ok := t.byName[req.Name]
	if !ok {
		return c.unavailable(ctx, req.Name)
	}
	c.e = e
	c.ev.Tool = e.tool.ID

	args, canon, err := parseArgs(req.Arguments)
	if err != nil {
		return c.refuse(ctx, Failed(CodeInvalidArguments, "%v", err))
	}
	if err := e.schema.Validate(any(args)); err != nil {
		return c.refuseWith(ctx, Failed(CodeInvalidArguments, "arguments do not match the input schema: %s", clip(err.Error(), 2000)),
			CodeInvalidArguments, "arguments do not match the input schema: "+schemaErrorSummary(err))
	}
	c.ev.Args = t.hashArgs(canon)

	acc, err := deriveAccess(e.tool, args)
	if err != nil {
		ke := asError(err, CodeInvalidArguments)
		return c.refuseWith(ctx, ke, ke.Code, "the tool refused its arguments")
	}
	res, err := policy.NormalizeResource(acc.Resource)
	if err != nil {
		c.ev.Action = string(acc.Action)
		if errors.Is(err, policy.ErrOutsideWorkspace) {
			return c.refuseWith(ctx, Denied(CodePathOutsideWorkspace, "%v", err), CodePathOutsideWorkspace, "the path resolves outside the workspace")
		}
		return c.refuseWith(ctx, Failed(CodeInvalidArguments, "%v", err), CodeInvalidArguments, "the derived resource is malformed")
	}
	acc.Resource = res
	root := acc.ProtectedRoot
	if root != "" {
		if root, err = policy.NormalizeResource(root); err != nil {
			return c.refuse(ctx, Failed(CodeInternal, "tool %s derived an invalid protected root", e.tool.ID))
		}
	}
	c.ev.Action, c.ev.Resource = string(acc.Action), acc.Resource

	// The turn's capabilities narrow before the grants decide; they can only refuse.
	// The message does not list them: a capability may name tools this caller is not
	// shown, and nothing is learnt about unpublished tools.
	if !t.selected[e.tool.ID] && !t.caps.Allows(e.tool.ID, string(acc.Action)) {
		return c.refuse(ctx, Denied(CodeOutsideCapability, "this turn's capabilities do not allow %s %s", e.tool.ID, acc.Action).WithRetryable(false))
	}

	preq := policy.Request{
		Principal: t.principal, Tool: e.tool.ID, Action: string(acc.Action),
		Resource: acc.Resource, Protected: acc.Protected, ProtectedRoot: root,
	}
	d := t.policy.Decide(preq)
	// Revocation reaches open turns: once the grants have changed since the turn opened,
	// a call the turn's policy allows must also be allowed by the current one. The
	// catalogue stays as it was (it never changes under a harness) and a newer policy
	// never widens the turn: decisions can only tighten.
	if cur := t.k.policy.Load(); cur != t.policy && d.Reason == policy.ReasonAllowed {
		if now := cur.Decide(preq); now.Reason != policy.ReasonAllowed {
			d = now
		}
	}
	c.ev.GrantID = d.GrantID()
	switch d.Reason {
	case policy.ReasonAllowed:
	case policy.ReasonDenied:
		return c.refuse(ctx, Denied(CodeExplicitDeny, "a deny grant refuses %s %s on %s", e.tool.ID, acc.Action, describe(acc.Resource)))
	case policy.ReasonProtected:
		return c.refuse(ctx, Denied(CodeProtectedPath, "%s is protected: only a grant naming it allows %s", describe(acc.Resource), acc.Action))
	default:
		return c.refuse(ctx, Denied(CodeNoMatchingGrant, "no grant allows %s %s on %s", e.tool.ID, acc.Action, describe(acc.Resource)))
	}

	if e.tool.ID == EscalateID {
		return c.escalate(ctx, args)
	}

	// The allowed event is durable before the tool runs, so no crash can leave an
	// executed call without its event. No event, no run.
	c.ev.Decision = audit.Allowed
	if err := c.append(ctx); err != nil {
		return c.auditUnavailable(ctx, err)
	}
	c.phase.Store(phaseRunning)
	var out *Output
	var runErr error
	if cause := context.Cause(ctx); errors.Is(cause, ErrShutdown) {
		runErr = cause // the shutdown came between the decision and the run: do not start
	} else {
		out, runErr = t.run(ctx, &Call{ID: c.ev.CallID, Principal: t.principal, Tool: e.tool, Args: args, Arguments: canon, Access: acc, Peer: peerOf(req),
			ProtocolVersion: req.ProtocolVersion, InputResponses: req.InputResponses, RequestState: req.RequestState,
			TurnID: t.id, Meta: req.Meta})
	}
	if !c.phase.CompareAndSwap(phaseRunning, phaseRecorded) {
		// Shutdown recorded this call's outcome already: the tool outlived the grace
		// period after it was cancelled.
		return errorResult(Failed(CodeCancelledByShutdown, "cancelled by shutdown before the tool finished").WithRetryable(true)), nil
	}
	if runErr == nil && len(out.Result) > 0 {
		runErr = readRawResult(out)
	}
	if runErr == nil && (len(out.InputRequests) > 0 || len(out.RequestState) > 0) && req.ProtocolVersion != mcpspec.ModernVersion {
		runErr = Failed(CodeToolFailed, "the tool needs input, which this protocol version cannot carry")
	}
	if runErr != nil {
		code := CodeToolFailed
		if errors.Is(runErr, context.DeadlineExceeded) {
			code = CodeTimeout
		}
		ke := asFailure(runErr, code)
		// The tool's own message may quote argument values or output, so the audit
		// log keeps only the code; the caller gets the full message.
		c.ev.Decision, c.ev.Code, c.ev.Message = audit.Failed, string(ke.Code), "the tool failed"
		switch {
		case errors.Is(context.Cause(ctx), ErrShutdown):
			// Whatever the tool made of its cancelled context (a kill, a timeout), the
			// shutdown is why it stopped.
			ke = Failed(CodeCancelledByShutdown, "cancelled by shutdown before the tool finished: %s", ke.Message).WithRetryable(true)
			c.ev.Code, c.ev.Message = string(CodeCancelledByShutdown), "cancelled by shutdown"
		case errors.Is(ctx.Err(), context.Canceled):
			// The caller's side ended the call (a disconnect, notifications/cancelled,
			// the session or bridge closing): not a timeout, whatever the tool says.
			ke = Failed(CodeCancelled, "cancelled before the tool finished: %s", ke.Message).WithRetryable(true)
			c.ev.Code, c.ev.Message = string(CodeCancelled), "cancelled by the caller or its session"
		case ke.Status == StatusDenied:
			// The tool refused after authorization (a protected path it resolved, an
			// unsafe repository): the outcome is a refusal, not an outage.
			c.ev.Decision, c.ev.Message = audit.Denied, "the tool refused"
		}
		c.appendAfterRun(ctx)
		return errorResult(ke), nil
	}
	if out.ProtocolError != nil {
		c.ev.Decision, c.ev.Code, c.ev.Message = audit.Failed, string(CodeToolFailed), "the request lacked what the tool needs (a JSON-RPC error)"
		c.appendAfterRun(ctx)
		r := errorResult(Failed(CodeToolFailed, "%s", out.ProtocolError.Message).WithRetryable(false))
		if req.ProtocolVersion == mcpspec.ModernVersion {
			r.ProtocolError = out.ProtocolError
		}
		return r, nil
	}
	if out.IsError {
		c.ev.Decision, c.ev.Code, c.ev.Message = audit.Failed, string(CodeToolFailed), "the tool reported an error"
		c.appendAfterRun(ctx)
	}
	return buildResult(e.tool, out), nil
}

// run calls the tool, turning a panic into a failure so one bad tool cannot take the
// daemon down.
func (t *Turn) run(ctx context.Context, call *Call) (out *Output, err error) {
	defer func() {
		if r := recover(); r != nil {
			t.k.log.Error("tool panicked", "tool", call.Tool.ID, "call", call.ID, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			out, err = nil, Failed(CodeToolFailed, "the tool failed unexpectedly")
		}
	}()
	out, err = call.Tool.Run(ctx, call)
	if err == nil && out == nil {
		out = &Output{}
	}
	if err == nil && ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// A tool that returns normally after its deadline still answered; keep it.
		return out, nil
	}
	return out, err
}

// hashArgs hashes each argument's value from its canonical encoding: the bytes the
// schema's value was read from, never re-encoded. (They are what encoding/json writes
// for that value, so the hashes are the ones audit.HashArgs gives: docs/audit.md.)
func (t *Turn) hashArgs(canon json.RawMessage) map[string]string {
	h := t.k.opts.HashArg
	if h == nil || len(canon) <= 2 { // no arguments: "{}"
		return nil
	}
	out := map[string]string{}
	for name, v := range rpcwire.Members(canon) {
		out[name] = h(v)
	}
	return out
}

// callState carries one call's audit event through the decision.
type callState struct {
	t     *Turn
	e     *entry
	start time.Time
	ev    audit.Event
	// cancel cancels the call's context; Shutdown gives ErrShutdown as the cause.
	cancel context.CancelCauseFunc
	// phase is phaseDeciding, phaseRunning or phaseRecorded (shutdown.go); whoever moves
	// it from running to recorded writes the outcome.
	phase atomic.Int32
}

func (c *callState) append(ctx context.Context) error {
	ev := c.ev
	ev.Time = c.t.k.opts.Now().UTC()
	ev.LatencyMicros = time.Since(c.start).Microseconds()
	// The event must be written even if the caller has gone: a decision without its
	// record is what fail-closed auditing exists to prevent.
	err := c.t.k.opts.Audit.AppendAudit(context.WithoutCancel(ctx), &ev)
	if err == nil {
		if n := c.t.k.outage.succeeded(); n > 0 {
			c.t.k.log.Warn("audit: appends succeed again", "failed_appends", n)
		}
	}
	return err
}

// logAuditFailure logs a failed append, thinned while the failures continue.
func (c *callState) logAuditFailure(msg string, err error) {
	if n, ok := c.t.k.outage.failed(); ok {
		c.t.k.log.Error(msg, "call", c.ev.CallID, "tool", c.ev.Tool, "err", err, "consecutive_failures", n)
	}
}

// appendAfterRun records a failure after the tool ran. The call already happened and
// its allowed event exists, so a write failure here is logged, not returned.
func (c *callState) appendAfterRun(ctx context.Context) {
	if err := c.append(ctx); err != nil {
		c.logAuditFailure("audit: recording a failed call", err)
	}
}

func (c *callState) refuse(ctx context.Context, ke *Error) (*mcpspec.CallResult, error) {
	return c.refuseWith(ctx, ke, ke.Code, ke.Message)
}

// refuseWith records a refusal (auditMsg is what the log keeps: it never echoes
// argument values) and returns it as a result. A refusal whose event cannot be written
// is still a refusal: nothing ran, so failing closed changes nothing for the caller
// except the code, which then says audit_unavailable.
func (c *callState) refuseWith(ctx context.Context, ke *Error, auditCode Code, auditMsg string) (*mcpspec.CallResult, error) {
	c.ev.Decision = audit.Denied
	if ke.Status == StatusFailed {
		c.ev.Decision = audit.Failed
	}
	c.ev.Code, c.ev.Message = string(auditCode), clip(auditMsg, 500)
	if err := c.append(ctx); err != nil {
		return c.auditUnavailable(ctx, err)
	}
	return errorResult(ke), nil
}

func (c *callState) auditUnavailable(_ context.Context, err error) (*mcpspec.CallResult, error) {
	c.logAuditFailure("audit: append failed; refusing the call", err)
	c.t.failed.Store(true)
	return errorResult(Failed(CodeAuditUnavailable, "the audit log could not record this call, so it was not run").WithRetryable(true)), nil
}

// unavailable refuses a name that is not in this turn's catalogue. The caller always
// sees tool_unavailable; the audit event says namespace_disabled or outside_capability
// when that is why (the latter only for a tool the grants would have published).
func (c *callState) unavailable(ctx context.Context, name string) (*mcpspec.CallResult, error) {
	c.ev.Tool = safeName(name)
	code := CodeToolUnavailable
	if e := c.t.registeredAs(name); e != nil {
		c.ev.Tool = e.tool.ID
		np := c.t.nspol[e.ns]
		if on, ok := c.t.ns[e.ns]; np.Disabled || ok && !on {
			code = CodeNamespaceDisabled
		} else if np.ExplicitOnly && c.t.policy.MayUse(c.t.principal, e.tool.ID) {
			code = CodeNotSelected
		} else if !c.t.caps.Covers(e.tool.ID) && c.t.policy.MayUse(c.t.principal, e.tool.ID) {
			code = CodeOutsideCapability
		}
	}
	ke := Denied(CodeToolUnavailable, "tool %q is not available", safeName(name))
	return c.refuseWith(ctx, ke, code, ke.Message)
}

// registeredAs finds the registered tool a name would publish as, for audit only. It
// runs only on the refusal path.
func (t *Turn) registeredAs(name string) *entry {
	k := t.k
	k.mu.RLock()
	defer k.mu.RUnlock()
	if t.namer == nil {
		return k.tools[name]
	}
	if len(name) > 512 {
		return nil
	}
	for id, e := range k.tools {
		if t.namer(id) == name {
			return e
		}
	}
	return nil
}

// parseArgs reads the arguments object once, from the canonical encoding the strict
// decoder produced (rpcwire.Value: one pass, no re-encoding; input from anywhere else
// is read strictly first), with numbers kept exactly as sent (json.Number). The same
// value is validated and handed to the tool, and the same bytes are hashed for the
// audit event and handed to a tool that forwards them: what the schema checked is what
// runs.
func parseArgs(raw json.RawMessage) (map[string]any, json.RawMessage, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return map[string]any{}, json.RawMessage(`{}`), nil
	}
	if trimmed[0] != '{' {
		return nil, nil, errors.New("arguments must be a JSON object")
	}
	v, canon, err := rpcwire.Value(trimmed)
	if err != nil {
		return nil, nil, fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	args, ok := v.(map[string]any)
	if !ok {
		return nil, nil, errors.New("arguments must be a JSON object")
	}
	return args, canon, nil
}

// schemaErrorSummary names where validation failed without quoting any value, so it
// can be stored in the audit log.
func schemaErrorSummary(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return "invalid"
	}
	var locs []string
	var walk func(v *jsonschema.ValidationError)
	walk = func(v *jsonschema.ValidationError) {
		if len(v.Causes) == 0 {
			kw := ""
			if v.ErrorKind != nil {
				kw = strings.Join(v.ErrorKind.KeywordPath(), "/")
			}
			locs = append(locs, fmt.Sprintf("/%s (%s)", strings.Join(v.InstanceLocation, "/"), kw))
			return
		}
		for _, cv := range v.Causes {
			if len(locs) < 8 {
				walk(cv)
			}
		}
	}
	walk(ve)
	return clip(strings.Join(locs, ", "), 400)
}

func deriveAccess(t *Tool, args map[string]any) (acc Access, err error) {
	if t.Access == nil {
		a := ActionExecute
		if t.Annotations.ReadOnly {
			a = ActionRead
		}
		return Access{Action: a}, nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = Failed(CodeInternal, "tool %s could not derive its access", t.ID)
		}
	}()
	acc, err = t.Access(args)
	if err != nil {
		return acc, err
	}
	switch acc.Action {
	case ActionRead, ActionWrite, ActionExecute:
	default:
		return acc, Failed(CodeInternal, "tool %s derived an unknown action %q", t.ID, acc.Action)
	}
	return acc, nil
}

// asError is AsError; anything else becomes fallback.
func asError(err error, fallback Code) *Error {
	if ke, ok := AsError(err); ok {
		return ke
	}
	return Failed(fallback, "%v", err)
}

// asFailure is asError for a tool's Run: its plain errors become failed with code.
func asFailure(err error, code Code) *Error {
	if ke, ok := AsError(err); ok {
		return ke
	}
	return Failed(code, "%s", clip(err.Error(), 2000))
}

func describe(res string) string {
	if res == "" {
		return "any resource"
	}
	return fmt.Sprintf("%q", res)
}

// safeName is a caller-supplied tool name fit for a message or an audit event: at most
// maxNameInMessage bytes of valid UTF-8.
func safeName(name string) string {
	return strings.ToValidUTF8(clip(name, maxNameInMessage), "\uFFFD")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Do not cut a UTF-8 sequence in half.
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

func peerOf(req *mcpspec.CallRequest) mcpspec.Peer {
	if req.Peer == nil {
		return mcpspec.NoPeer{}
	}
	return req.Peer
}

// ToolID is the canonical id of the tool this turn publishes as name, and whether it
// publishes one: a bounded label for metrics (only the catalogue's names map).
func (t *Turn) ToolID(name string) (string, bool) {
	if e, ok := t.byName[name]; ok {
		return e.tool.ID, true
	}
	return "", false
}
