package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/toolgate/toolgate/internal/app"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/policy"
)

// turnCapabilities are the --capability values split by kind: tool patterns, which
// narrow the turn, and selections of upstream servers' tools (mcpServer=NAME,
// mcpTool=SERVER/RAW_TOOL), which bring tools into it, those of servers whose
// allow_implicit_invocation is false included.
type turnCapabilities struct {
	patterns   []string
	selections []kernel.Selection
}

// splitCapabilities sorts --capability values into patterns and selections and checks
// both, with the rules the kernel applies when the turn opens. A tool pattern never
// contains '=', so the two forms cannot be confused.
func splitCapabilities(values []string) (turnCapabilities, error) {
	var tc turnCapabilities
	for _, v := range values {
		kind, arg, ok := strings.Cut(v, "=")
		if !ok {
			tc.patterns = append(tc.patterns, v)
			continue
		}
		switch kind {
		case kernel.SelectServer:
			if !policy.ValidNamespace(arg) {
				return tc, fmt.Errorf("--capability %s: %q is not a server name", clipArg(v), clipArg(arg))
			}
			tc.selections = append(tc.selections, kernel.Selection{ID: v, Label: arg, Kind: kind, Server: arg, ScopeKind: "workspace"})
		case kernel.SelectTool:
			server, raw, ok := strings.Cut(arg, "/")
			if !ok || !policy.ValidNamespace(server) || raw == "" {
				return tc, fmt.Errorf("--capability %s: want mcpTool=SERVER/RAW_TOOL (the tool's own name on that server)", clipArg(v))
			}
			tc.selections = append(tc.selections, kernel.Selection{ID: v, Label: server + " / " + raw, Kind: kind, Server: server, RawTool: raw, ScopeKind: "workspace"})
		default:
			return tc, fmt.Errorf("--capability %s: the kinds are %s=NAME and %s=SERVER/RAW_TOOL; a tool pattern has no '='", clipArg(v), kernel.SelectServer, kernel.SelectTool)
		}
	}
	if _, err := policy.CompileCapabilities(tc.patterns); err != nil {
		return tc, fmt.Errorf("--capability: %w", err)
	}
	return tc, nil
}

// clipArg quotes at most 128 bytes of a caller's value for a message.
func clipArg(s string) string {
	if len(s) > 128 {
		return fmt.Sprintf("%q…", s[:128])
	}
	return fmt.Sprintf("%q", s)
}

// reportSelections writes what became of each selection to w (stderr), one line each.
func reportSelections(w io.Writer, t app.Turn) {
	for _, d := range app.Selections(t) {
		flag := "--capability " + d.Selection.String()
		if d.Selection.ID == "--server" {
			flag = "--server " + d.Selection.Server
		}
		if d.Accepted {
			fmt.Fprintf(w, "toolgate: %s accepted: %s\n", flag, d.Message)
		} else {
			fmt.Fprintf(w, "toolgate: %s rejected (%s): %s\n", flag, d.Reason, d.Message)
		}
	}
}
