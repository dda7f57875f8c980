package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/workspace"
)

// Confinement returns its own errors; the kernel reports them with their reason codes,
// wherever a tool returns them (deriving its access or running) and however wrapped.
func TestConfinementErrorsHaveTheirCodes(t *testing.T) {
	outside := &workspace.OutsideError{Path: "../x", Reason: `".." is refused`}
	loop := fmt.Errorf("resolving %q: %w", "loop1", workspace.ErrTooManyLinks)
	tool := func(id string, accessErr, runErr error) *kernel.Tool {
		return &kernel.Tool{ID: id, InputSchema: json.RawMessage(`{"type":"object"}`),
			Access: func(map[string]any) (kernel.Access, error) {
				return kernel.Access{Action: kernel.ActionRead}, accessErr
			},
			Run: func(context.Context, *kernel.Call) (*kernel.Output, error) { return nil, runErr },
		}
	}
	f := newFixture(t,
		tool("ws.access_outside", fmt.Errorf("deriving the path: %w", outside), nil),
		tool("ws.access_loop", loop, nil),
		tool("ws.run_outside", nil, fmt.Errorf("opening: %w", outside)),
	)
	f.grants(t, policy.Grant{Principal: "p", Tool: "ws.*"})
	tr := f.turn(t, "p")
	for _, c := range []struct {
		tool     string
		status   kernel.Status
		code     kernel.Code
		message  string
		decision audit.Decision
	}{
		{"ws.access_outside", kernel.StatusDenied, kernel.CodePathOutsideWorkspace, `path "../x" is outside the workspace: ".." is refused`, audit.Denied},
		{"ws.access_loop", kernel.StatusFailed, kernel.CodeToolFailed, `resolving "loop1": too many levels of symbolic links`, audit.Failed},
		{"ws.run_outside", kernel.StatusDenied, kernel.CodePathOutsideWorkspace, `path "../x" is outside the workspace: ".." is refused`, audit.Denied},
	} {
		b := refusal(t, call(t, tr, c.tool, `{}`), c.status, c.code)
		if b.Message != c.message {
			t.Errorf("%s: message %q, want %q", c.tool, b.Message, c.message)
		}
		evs := f.aud.Events()
		last := evs[len(evs)-1]
		if last.Tool != c.tool || last.Decision != c.decision || last.Code != string(c.code) {
			t.Errorf("%s: audit event %+v, want %s %s", c.tool, last, c.decision, c.code)
		}
	}
	if ke, ok := kernel.AsError(fmt.Errorf("x: %w", outside)); !ok || ke.Code != kernel.CodePathOutsideWorkspace {
		t.Errorf("AsError(wrapped OutsideError) = %v, %v", ke, ok)
	}
	if _, ok := kernel.AsError(fmt.Errorf("plain")); ok {
		t.Error("AsError mapped a plain error")
	}
}
