// Package mcpservertest provides a fake mcpserver.Turn with a few scripted tools,
// for tests of the MCP layer and of anything that serves a Turn. It decides
// nothing: every listed tool may be called, and an unknown name gets a
// tool_unavailable result like the kernel's.
package mcpservertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/mcpspec"
)

// Tools published by NewTurn. Their behaviour:
//
//	echo   returns its arguments (re-encoded) as one text block and as structuredContent
//	fail   returns an isError result (status failed, code tool_failed)
//	elicit asks the client (elicitation/create) and returns the answer as text,
//	       or an isError result with the Peer's error
//	block  waits until the call's context ends or Release is called; returns "released"
//	boom   returns a non-nil error (an internal failure: JSON-RPC -32603)
//	panic  panics
//	ask    asks the client a question the way the request's era allows: in
//	       2026-07-28 it answers resultType input_required (request state "asked")
//	       and, on the retry carrying inputResponses, returns them as text; in an
//	       older session it sends elicitation/create through the Peer
const (
	ToolEcho   = "test.echo"
	ToolFail   = "test.fail"
	ToolElicit = "test.elicit"
	ToolBlock  = "test.block"
	ToolBoom   = "test.boom"
	ToolPanic  = "test.panic"
	ToolAsk    = "test.ask"
)

// Turn is a fake Turn. The zero value is not usable; call NewTurn.
type Turn struct {
	mu      sync.Mutex
	calls   []mcpspec.CallRequest
	closed  int
	release chan struct{}
	started chan string

	// ListErr, when set, makes ListTools fail.
	ListErr error
	// Empty makes ListTools publish no tool, as the Turn of a principal that
	// can see none; CallTool still runs the scripted tools, so a test can hold
	// such a session busy.
	Empty bool
	// ExecutionID is served in tools/list _meta.
	ExecutionID string
}

// NewTurn returns a fake Turn publishing the tools above.
func NewTurn() *Turn {
	return &Turn{release: make(chan struct{}), started: make(chan string, 64), ExecutionID: "execution-test"}
}

func tool(name, desc string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"name":        name,
		"description": desc,
		"inputSchema": map[string]any{"type": "object"},
		"_meta":       map[string]any{"toolgate/namespace": "test", "toolgate/source": "toolgate"},
	})
	return b
}

var elicitParams = map[string]any{
	"message": "Proceed?",
	"requestedSchema": map[string]any{
		"type":       "object",
		"properties": map[string]any{"ok": map[string]any{"type": "boolean"}},
	},
}

// CatalogHash is the fixed hash the fake serves.
const CatalogHash = "0000000000000000000000000000000000000000000000000000000000000000"

// ListTools implements mcpserver.Turn.
func (t *Turn) ListTools(ctx context.Context) (*mcpspec.ToolList, error) {
	if t.ListErr != nil {
		return nil, t.ListErr
	}
	if t.Empty {
		return &mcpspec.ToolList{Tools: []json.RawMessage{}, CatalogHash: CatalogHash, ExecutionID: t.ExecutionID}, nil
	}
	return &mcpspec.ToolList{
		Tools: []json.RawMessage{
			tool(ToolEcho, "Returns its arguments."),
			tool(ToolFail, "Always fails."),
			tool(ToolElicit, "Asks the user a question."),
			tool(ToolBlock, "Waits until released or cancelled."),
			tool(ToolBoom, "Fails internally."),
			tool(ToolPanic, "Panics."),
			tool(ToolAsk, "Asks the user, in the way the protocol revision allows."),
		},
		CatalogHash: CatalogHash,
		ExecutionID: t.ExecutionID,
	}, nil
}

func text(s string) []json.RawMessage {
	b, _ := json.Marshal(map[string]string{"type": "text", "text": s})
	return []json.RawMessage{b}
}

func refusal(status, code, msg string) *mcpspec.CallResult {
	body, _ := json.Marshal(map[string]string{"status": status, "code": code, "message": msg})
	return &mcpspec.CallResult{
		Content: text(string(body)),
		IsError: true,
		Meta:    map[string]any{mcpspec.MetaStatus: status, mcpspec.MetaCode: code},
	}
}

// CallTool implements mcpserver.Turn.
func (t *Turn) CallTool(ctx context.Context, req *mcpspec.CallRequest) (*mcpspec.CallResult, error) {
	t.mu.Lock()
	t.calls = append(t.calls, *req)
	closed := t.closed > 0
	t.mu.Unlock()
	if closed {
		return refusal("denied", "turn_closed", "the turn is over"), nil
	}
	select {
	case t.started <- req.Name:
	default:
	}
	switch req.Name {
	case ToolEcho:
		args := req.Arguments
		if args == nil {
			args = json.RawMessage(`{}`)
		}
		return &mcpspec.CallResult{Content: text(string(args)), StructuredContent: args}, nil
	case ToolFail:
		return refusal("failed", "tool_failed", "this tool always fails"), nil
	case ToolElicit:
		ans, err := req.Peer.Request(ctx, "elicitation/create", elicitParams)
		if err != nil {
			return refusal("failed", "tool_failed", err.Error()), nil
		}
		return &mcpspec.CallResult{Content: text(string(ans))}, nil
	case ToolBlock:
		select {
		case <-ctx.Done():
			return refusal("failed", "timeout", "cancelled"), nil
		case <-t.release:
			return &mcpspec.CallResult{Content: text("released")}, nil
		}
	case ToolAsk:
		if req.ProtocolVersion == "" {
			ans, err := req.Peer.Request(ctx, "elicitation/create", elicitParams)
			if err != nil {
				return refusal("failed", "tool_failed", err.Error()), nil
			}
			return &mcpspec.CallResult{Content: text(string(ans))}, nil
		}
		if req.InputResponses == nil {
			var caps map[string]json.RawMessage
			_ = json.Unmarshal(req.Peer.ClientCapabilities(), &caps)
			if _, ok := caps["elicitation"]; !ok {
				// Never ask for input the client did not declare it can give.
				return refusal("failed", "tool_failed", "the client cannot answer questions"), nil
			}
			ir, _ := json.Marshal(map[string]any{"q": map[string]any{"method": "elicitation/create", "params": elicitParams}})
			return &mcpspec.CallResult{ResultType: mcpspec.ResultInputRequired, InputRequests: ir, RequestState: json.RawMessage(`"asked"`)}, nil
		}
		if string(req.RequestState) != `"asked"` {
			return refusal("failed", "tool_failed", "unknown request state"), nil
		}
		return &mcpspec.CallResult{Content: text(string(req.InputResponses))}, nil
	case ToolBoom:
		return nil, errors.New("secret internal detail")
	case ToolPanic:
		panic("secret panic detail")
	}
	return refusal("denied", "tool_unavailable", fmt.Sprintf("tool %q is not available", req.Name)), nil
}

// Release lets every blocked call (and every later one) return.
func (t *Turn) Release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.release:
	default:
		close(t.release)
	}
}

// Started receives the name of each call as it starts (buffered; extra names
// are dropped when nobody reads).
func (t *Turn) Started() <-chan string { return t.started }

// Calls returns the calls received so far.
func (t *Turn) Calls() []mcpspec.CallRequest {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]mcpspec.CallRequest(nil), t.calls...)
}

// Close implements io.Closer: the MCP layer closes a Turn when its session ends.
func (t *Turn) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed++
	return nil
}

// Closed reports how many times Close was called.
func (t *Turn) Closed() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// Peer is a fake mcpspec.Peer answering every request with Answer (or Err).
type Peer struct {
	Caps   json.RawMessage
	Answer json.RawMessage
	Err    error

	mu       sync.Mutex
	Requests []string
}

// ClientCapabilities implements mcpspec.Peer.
func (p *Peer) ClientCapabilities() json.RawMessage { return p.Caps }

// Request implements mcpspec.Peer.
func (p *Peer) Request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	p.mu.Lock()
	p.Requests = append(p.Requests, method)
	p.mu.Unlock()
	if p.Err != nil {
		return nil, p.Err
	}
	return p.Answer, nil
}

var (
	_ mcpserver.Turn = (*Turn)(nil)
	_ mcpspec.Peer   = (*Peer)(nil)
)
