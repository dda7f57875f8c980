package mgmt

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/toolgate/toolgate/internal/rpcwire"
)

// dispatcher runs one decoded request against a Manager and encodes its answer. Both
// transports use it, so a method answers the same bytes over POST and WebSocket.
type dispatcher struct {
	m   Manager // already Checked
	log *slog.Logger
}

// answer runs req (a request: a method and an id) and returns the JSON-RPC answer.
// A panic in the Manager is answered as internal_error and logged.
func (d *dispatcher) answer(ctx context.Context, who Caller, req *rpcwire.Message) (out []byte) {
	defer func() {
		if p := recover(); p != nil {
			d.log.Error("management method panicked", "method", req.Method, "panic", fmt.Sprint(p))
			out = errorAnswer(req.ID, &Error{Code: CodeInternal, Message: "internal error"})
		}
	}()
	result, err := d.run(ctx, who, req.Method, req.Params)
	if err != nil {
		e, internal := asError(err)
		if internal {
			d.log.Error("management method failed", "method", req.Method, "principal", who.Principal, "err", err)
		}
		return errorAnswer(req.ID, e)
	}
	b, err := rpcwire.Result(req.ID, result)
	if err != nil {
		d.log.Error("encoding a management result", "method", req.Method, "err", err)
		return errorAnswer(req.ID, &Error{Code: CodeInternal, Message: "internal error"})
	}
	return b
}

func (d *dispatcher) run(ctx context.Context, who Caller, method string, raw json.RawMessage) (any, error) {
	switch method {
	case MethodList:
		p, err := decodeList(raw)
		if err != nil {
			return nil, err
		}
		return d.m.List(ctx, who, p)
	case MethodInstall:
		p, err := decodeInstall(raw)
		if err != nil {
			return nil, err
		}
		return d.m.Install(ctx, who, p)
	case MethodPolicySet:
		p, err := decodePolicySet(raw)
		if err != nil {
			return nil, err
		}
		return d.m.SetPolicy(ctx, who, p)
	case MethodRestart:
		r, err := decodeRef(method, raw)
		if err != nil {
			return nil, err
		}
		return d.m.Restart(ctx, who, RestartParams{r})
	case MethodUninstall:
		r, err := decodeRef(method, raw)
		if err != nil {
			return nil, err
		}
		return d.m.Uninstall(ctx, who, UninstallParams{r})
	case MethodDetails:
		r, err := decodeRef(method, raw)
		if err != nil {
			return nil, err
		}
		return d.m.Details(ctx, who, DetailsParams{r})
	}
	if res, ok, err := d.runAuth(ctx, who, method, raw); ok {
		return res, err
	}
	return nil, Errorf(CodeMethodNotFound, "method not found: %q", method)
}

// errorAnswer encodes an error answer to id.
func errorAnswer(id jsonrpc.ID, e *Error) []byte { return rpcwire.Error(id, e.rpcError()) }

// wireError gives a decoding error of internal/rpcwire (-32700 or -32600) its stable
// code, keeping rpcwire's message.
func wireError(e *jsonrpc.Error) *Error {
	if e.Code == jsonrpc.CodeParseError {
		return &Error{Code: CodeParseError, Message: e.Message}
	}
	return &Error{Code: CodeInvalidRequest, Message: e.Message}
}

// Encode is the encoding every answer's result has on the wire (compact, no HTML
// escaping): the CLI's --json prints a result with it, so an in-process command prints
// the bytes the daemon would have sent.
func Encode(v any) ([]byte, error) { return rpcwire.Encode(v) }

// encodeNotification encodes n as a JSON-RPC notification.
func encodeNotification(n Notification) ([]byte, error) {
	return rpcwire.Request(jsonrpc.ID{}, n.Method(), n)
}
