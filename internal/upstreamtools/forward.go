package upstreamtools

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/mcpspec"
)

// A 2026-07-28 upstream's own input rounds (docs/kernel.md, "Upstream tools"): an
// upstream the host dialled in the stateless revision (docs/host.md, "Eras") answers a call that needs input with
// resultType "input_required", its inputRequests and, optionally, a requestState of
// its own. That result reaches the caller as the upstream wrote it. The caller's
// retry carries inputResponses and the upstream's requestState (or none, when the
// upstream sent none): it is a new call, authorized and audited like any other, sent
// upstream with both members as the caller wrote them. The upstream, which issued the
// state, is the one to check it; toolgate's own states (inputStatePrefix, issued for
// a session-based upstream's requests) are opened by resume instead.

// upstreamRound reports a retry of an upstream's own input round: a 2026-07-28 call
// (to a tool listed on a 2026-07-28 connection: Options.stateless) that carries
// inputResponses or a requestState toolgate did not issue. To a session-based
// upstream, whose input rounds toolgate runs itself (input.go), a state toolgate did
// not issue is refused instead.
func upstreamRound(c *kernel.Call) bool {
	if c.ProtocolVersion != mcpspec.ModernVersion {
		return false
	}
	if len(c.RequestState) == 0 {
		return len(c.InputResponses) > 0
	}
	var tok string
	return json.Unmarshal(c.RequestState, &tok) != nil || !strings.HasPrefix(tok, inputStatePrefix)
}

// forwardRound sends such a retry upstream: the raw name, the arguments' bytes, the
// inputResponses and requestState as the caller sent them, the progress token.
func forwardRound(ctx context.Context, up Caller, server, raw string, c *kernel.Call) (*kernel.Output, error) {
	params := Params(raw, c.Arguments, progressToken(c.Meta))
	params = appendMember(params, "inputResponses", c.InputResponses)
	params = appendMember(params, "requestState", c.RequestState)
	res, err := up.Call(ctx, server, "tools/call", params, host.CallOptions{SessionKey: c.TurnID})
	if err != nil {
		return nil, asError(server, err)
	}
	return &kernel.Output{Result: res}, nil
}

// appendMember adds "name":value to the object obj (value raw JSON; nothing when it
// is empty or null).
func appendMember(obj json.RawMessage, name string, value json.RawMessage) json.RawMessage {
	v := strings.TrimSpace(string(value))
	if v == "" || v == "null" {
		return obj
	}
	n, _ := json.Marshal(name)
	out := make([]byte, 0, len(obj)+len(n)+len(v)+2)
	out = append(out, obj[:len(obj)-1]...)
	out = append(out, ',')
	out = append(out, n...)
	out = append(out, ':')
	out = append(out, v...)
	return append(out, '}')
}
