package kernel

import (
	"context"
	"encoding/json"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/mcpspec"
)

// escalateTool is toolgate.escalate: a turn asks a person to decide. It is registered
// like any other tool (so it is published only to principals with a grant on it), but
// its calls are answered by the turn itself and never reach Run.
func escalateTool() *Tool {
	return &Tool{
		ID:    EscalateID,
		Title: "Escalate to a person",
		Description: "Stop and ask a person to decide. Use when the task needs something you are not " +
			"permitted to do. The turn ends: every later call on it is refused escalation_pending.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"reason":{"type":"string","minLength":1,"maxLength":2000,"description":"What you need decided and why."},` +
			`"note":{"type":"string","maxLength":8000,"description":"Anything the person should know."}},` +
			`"required":["reason"],"additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"escalated":{"type":"boolean"},"reason":{"type":"string"},"note":{"type":"string"}},` +
			`"required":["escalated","reason","note"]}`),
		Annotations: Annotations{ReadOnly: false, Destructive: false, Idempotent: false},
		Source:      "toolgate",
		Access:      func(map[string]any) (Access, error) { return Access{Action: ActionExecute}, nil },
		Run: func(context.Context, *Call) (*Output, error) {
			return nil, Failed(CodeInternal, "toolgate.escalate is answered by the turn")
		},
	}
}

// escalate records the escalation (audit first: no record, no escalation), ends the
// turn with the escalated outcome and answers succeeded.
func (c *callState) escalate(ctx context.Context, args map[string]any) (*mcpspec.CallResult, error) {
	t := c.t
	if !t.escalated.CompareAndSwap(false, true) {
		return c.refuse(ctx, Denied(CodeEscalationPending, "this turn already escalated to a person").WithRetryable(false))
	}
	reason, _ := args["reason"].(string)
	note, _ := args["note"].(string)
	c.ev.Decision = audit.Escalated
	if err := c.append(ctx); err != nil {
		t.escalated.Store(false)
		return c.auditUnavailable(ctx, err)
	}
	esc := Escalation{ID: newID("esc-"), TurnID: t.id, CallID: c.ev.CallID, Principal: t.principal,
		Reason: reason, Note: note, CreatedAt: t.k.opts.Now().UTC()}
	if err := t.k.opts.Escalations.RecordEscalation(context.WithoutCancel(ctx), esc); err != nil {
		t.k.log.Error("recording an escalation", "call", c.ev.CallID, "err", err)
		c.ev.Decision, c.ev.Code, c.ev.Message = audit.Failed, string(CodeInternal), "the escalation could not be stored"
		c.appendAfterRun(ctx)
		t.failed.Store(true)
		return errorResult(Failed(CodeInternal, "the escalation could not be stored").WithRetryable(true)), nil
	}
	out := map[string]any{"escalated": true, "reason": reason, "note": note}
	return buildResult(c.e.tool, &Output{Structured: out}), nil
}
