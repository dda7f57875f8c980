package upstream

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/toolgate/toolgate/internal/telemetry"
)

// withTrace puts ctx's W3C trace context in params._meta (traceparent, tracestate:
// the keys MCP carries it under), replacing whatever params held there, so the
// upstream continues the call's trace on any transport, stdio included
// (docs/deployment.md, "Traces"). Without a trace in ctx it removes any trace keys
// params carry (a caller's _meta relayed as it was): the upstream never gets a
// trace context toolgate did not write, malformed or not. The values come from the
// propagator, never from the bytes a caller sent.
func withTrace(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	members := telemetry.MetaMembers(ctx)
	if members == nil {
		if !bytes.Contains(params, []byte(`"trace`)) {
			return params, nil // the common untraced case: one scan, nothing allocated
		}
		trimmed := bytes.TrimSpace(params)
		if len(trimmed) == 0 || trimmed[0] != '{' {
			return params, nil
		}
		if _, _, ok := memberValue(trimmed, "_meta"); !ok {
			return params, nil
		}
	}
	return spliceMeta(params, members, telemetry.IsTraceKey)
}
