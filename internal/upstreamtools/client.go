package upstreamtools

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/upstream"
)

// ToClient sets opts so that what the upstream asks and tells the client during the
// call reaches the caller behind peer (host.CallOptions.Request and Notify): its
// sampling, elicitation and roots requests become the peer's own requests, answered
// or refused by the caller; its log messages (notifications/message) are sent on the
// call's stream. A caller that cannot take requests (a JSON answer, the 2026-07-28
// revision) refuses them: the upstream gets -32601 for a capability the caller did
// not declare, else -32603.
func ToClient(ctx context.Context, peer mcpspec.Peer, opts *host.CallOptions) {
	if peer == nil {
		return
	}
	opts.Request = func(rctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		res, err := peer.Request(rctx, method, params)
		if err == nil {
			return res, nil
		}
		var je *jsonrpc.Error
		if errors.As(err, &je) {
			return nil, &upstream.RPCError{Code: je.Code, Message: je.Message, Data: je.Data}
		}
		if errors.Is(err, mcpspec.ErrPeerUnsupported) {
			return nil, &upstream.RPCError{Code: jsonrpc.CodeMethodNotFound, Message: "the client cannot take " + method}
		}
		return nil, err
	}
	if n, ok := peer.(mcpspec.Notifier); ok {
		opts.Notify = func(method string, params json.RawMessage) {
			// Best effort, as progress: a client that cannot take it loses nothing else.
			_ = n.Notify(context.WithoutCancel(ctx), method, params)
		}
	}
}
