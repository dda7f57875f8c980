package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/rpcwire"
)

// errPanic marks a Turn that panicked: an unhandled failure, answered 500 over
// HTTP (when nothing was written yet) and -32603 over stdio.
var errPanic = errors.New("mcpserver: handler panicked")

// conn is the protocol state of one MCP session, shared by both transports: the
// negotiated version, the client's capabilities, in-flight calls (for
// notifications/cancelled) and server-to-client requests awaiting answers.
type conn struct {
	turn         Turn
	info         mcpspec.Implementation
	instructions string
	log          *slog.Logger
	// stateless enables the 2026-07-28 revision; off, its requests are read as
	// older-era messages (server/discover is then an unknown method).
	stateless bool

	mu         sync.Mutex
	version    string
	clientCaps json.RawMessage
	inflight   map[string]*inflightCall
	pending    map[string]chan *rpcwire.Message
	closed     bool
	// initialized is set once an initialize succeeded: only then are
	// session-based requests other than ping served.
	initialized bool
	// ready is set when notifications/initialized arrives after it: only then
	// may the server send the client requests other than ping.
	ready bool

	// pushes are the lists whose changes the session's transport delivers (set
	// once, before the session serves; getstream.go).
	pushes ListKind
	// pushAnyEra delivers them in every session-based era (stdio: no GET stream needed).
	pushAnyEra bool

	nextID atomic.Int64
	// params are the tools' x-mcp-header bindings (paramheaders.go).
	params paramTable
}

func newConn(turn Turn, info mcpspec.Implementation, instructions string, log *slog.Logger, stateless bool) *conn {
	return &conn{
		turn: turn, info: info, instructions: instructions, log: log, stateless: stateless,
		inflight: map[string]*inflightCall{},
		pending:  map[string]chan *rpcwire.Message{},
	}
}

// close fails every server-to-client request still waiting, refuses new ones,
// and cancels the calls in flight.
func (c *conn) close() {
	c.failPending()
	c.mu.Lock()
	calls := c.inflight
	c.inflight = map[string]*inflightCall{}
	c.mu.Unlock()
	for _, call := range calls {
		call.cancel()
	}
}

// failPending fails the server-to-client requests still waiting and refuses new
// ones: nothing can answer them any more (the input ended). Calls go on.
func (c *conn) failPending() {
	c.mu.Lock()
	c.closed = true
	pending := c.pending
	c.pending = map[string]chan *rpcwire.Message{}
	c.mu.Unlock()
	for _, ch := range pending {
		close(ch)
	}
}

// bodyRun is a decoded body whose items were decided in arrival order (begin)
// and whose admitted requests are still to run (run).
type bodyRun struct {
	c       *conn
	items   []rpcwire.Item
	answers [][]byte // one per item, nil where nothing is (yet) answered
	todo    []int    // the requests to run, by index
	// refused is the handshake's refusal of a body that is one request (see
	// admit); HTTP answers it 400.
	refused *jsonrpc.Error
}

// begin decides a decoded body in arrival order, before anything of it runs:
// invalid items (and 2026-07-28 requests inside a batch) get their error,
// notifications and responses are handled, initialize is answered, and every
// other request is admitted or refused by the session's handshake (admit). It
// never blocks on a Turn, so the caller runs it in the order the bodies arrived
// and a request is decided with every earlier initialize already done.
func (c *conn) begin(items []rpcwire.Item, batch bool) *bodyRun {
	r := &bodyRun{c: c, items: items, answers: make([][]byte, len(items))}
	for i, it := range items {
		m := it.Msg
		switch {
		case it.Err != nil:
			r.answers[i] = rpcwire.Error(it.ID, it.Err)
		case batch && c.stateless && isModern(m):
			// 2026-07-28 has no batches: its requests travel one at a time.
			if m.IsRequest() {
				r.answers[i] = rpcwire.Error(m.ID, rpcwire.InvalidRequest("2026-07-28 requests cannot be batched"))
			}
		case m.IsResponse():
			c.deliver(m)
		case m.IsNotification():
			c.notify(m)
		default:
			if e := c.admit(m, batch); e != nil {
				r.answers[i] = rpcwire.Error(m.ID, e)
				if !batch {
					r.refused = e
				}
				continue
			}
			if m.Method == mcpspec.MethodInitialize && !(c.stateless && isModern(m)) {
				res, e := c.initialize(m)
				r.answers[i], _ = c.encodeAnswer(m, res, e)
				if e != nil && e.Code == jsonrpc.CodeInvalidRequest && !batch {
					r.refused = e // a second initialize
				}
				continue
			}
			r.todo = append(r.todo, i)
		}
	}
	return r
}

// pending reports whether requests remain to run.
func (r *bodyRun) pending() bool { return len(r.todo) > 0 }

// run runs the admitted requests concurrently (at most batchWorkers at a time)
// and returns every answer in input order, nil where nothing is answered.
// panicked reports a Turn that panicked.
func (r *bodyRun) run(ctx context.Context, peer mcpspec.Peer) (answers [][]byte, panicked bool) {
	var (
		wg  sync.WaitGroup
		sem = make(chan struct{}, batchWorkers)
		pan atomic.Bool
	)
	for _, i := range r.todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			a, err := r.c.handle(ctx, r.items[i].Msg, peer)
			if errors.Is(err, errPanic) {
				pan.Store(true)
			}
			r.answers[i] = a
		}()
	}
	wg.Wait()
	return r.answers, pan.Load()
}

// handle answers one valid message. It returns nil for notifications and for
// responses to server-initiated requests. err is errPanic when the Turn panicked
// (the caller decides how that is reported); the answer is then -32603.
func (c *conn) handle(ctx context.Context, m *rpcwire.Message, peer mcpspec.Peer) (answer []byte, err error) {
	answer, _, err = c.handleCode(ctx, m, peer, false)
	return answer, err
}

// handleCode is handle that also returns the JSON-RPC error of the answer, if
// any, so HTTP can pick a status for a 2026-07-28 request.
// forceModern serves m as a 2026-07-28 request even without modern _meta (its
// HTTP MCP-Protocol-Version header said so).
func (c *conn) handleCode(ctx context.Context, m *rpcwire.Message, peer mcpspec.Peer, forceModern bool) (answer []byte, rpcErr *jsonrpc.Error, err error) {
	if m.IsResponse() {
		c.deliver(m)
		return nil, nil, nil
	}
	if m.IsNotification() {
		c.notify(m)
		return nil, nil, nil
	}
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("panic while handling a request", "method", m.Method, "panic", fmt.Sprint(r))
			rpcErr = rpcwire.InternalError()
			answer, err = rpcwire.Error(m.ID, rpcErr), errPanic
		}
	}()
	key := rpcwire.IDKey(m.ID)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	call := &inflightCall{cancel: cancel}
	c.mu.Lock()
	c.inflight[key] = call // a reused id makes the later call the one cancellable
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.inflight[key] == call {
			delete(c.inflight, key)
		}
		c.mu.Unlock()
	}()

	var result any
	if meta, ok := modernMeta(m); c.stateless && (ok || forceModern) {
		result, rpcErr = c.dispatchModern(ctx, m, meta, peer)
	} else {
		result, rpcErr = c.dispatch(ctx, m, peer)
	}
	answer, rpcErr = c.encodeAnswer(m, result, rpcErr)
	return answer, rpcErr, nil
}

// encodeAnswer encodes the answer to request m: its error, or its result (an
// internal error when the result cannot be encoded). It returns the error the
// answer carries, if any.
func (c *conn) encodeAnswer(m *rpcwire.Message, result any, rpcErr *jsonrpc.Error) ([]byte, *jsonrpc.Error) {
	if rpcErr == nil {
		b, err := rpcwire.Result(m.ID, result)
		if err == nil {
			return b, nil
		}
		c.log.Error("encoding an answer", "method", m.Method, "err", err)
		rpcErr = rpcwire.InternalError()
	}
	return rpcwire.Error(m.ID, rpcErr), rpcErr
}

// dispatch answers a session-based request that admit let through; a method
// added here must be added to admit's list of the methods that wait for
// initialize.
func (c *conn) dispatch(ctx context.Context, m *rpcwire.Message, peer mcpspec.Peer) (any, *jsonrpc.Error) {
	switch m.Method {
	case mcpspec.MethodPing:
		return json.RawMessage(`{}`), nil
	case mcpspec.MethodToolsList:
		out, encoded, rpcErr := c.listTools(ctx)
		if rpcErr != nil {
			return nil, rpcErr
		}
		return toolsResult(out, encoded)
	case mcpspec.MethodToolsCall:
		return c.callTool(ctx, m, peer, false)
	}
	if isRelayed(m.Method) {
		return c.relay(ctx, m, false, peer)
	}
	return nil, rpcwire.MethodNotFound(m.Method)
}

func (c *conn) notify(m *rpcwire.Message) {
	switch m.Method {
	case mcpspec.NotificationCancelled:
		rid := m.Param("requestId") // exact names, never encoding/json's case folding
		if rid == nil {
			return
		}
		body, rpcErr := rpcwire.Decode([]byte(`{"jsonrpc":"2.0","id":` + string(rid) + `,"method":"x"}`))
		if rpcErr != nil || body.Items[0].Msg == nil {
			return
		}
		c.mu.Lock()
		call := c.inflight[rpcwire.IDKey(body.Items[0].Msg.ID)]
		c.mu.Unlock()
		if call != nil {
			call.cancel()
		}
	case mcpspec.NotificationInitialized:
		c.initializedNotice()
	default:
		// Anything else: nothing to do.
	}
}

// listTools is the tools/list result but for its tools when the turn gave them
// encoded (mcpspec.ToolList.Encoded, returned beside it for toolsResult to splice),
// else with them.
func (c *conn) listTools(ctx context.Context) (mcpspec.ListToolsResult, json.RawMessage, *jsonrpc.Error) {
	list, err := c.turn.ListTools(ctx)
	if err != nil || list == nil {
		c.log.Error("tools/list failed", "err", err)
		return mcpspec.ListToolsResult{}, nil, rpcwire.InternalError()
	}
	meta := map[string]any{
		mcpspec.MetaCatalogHash: list.CatalogHash,
		mcpspec.MetaExecutionID: list.ExecutionID,
	}
	if list.Encoded != nil {
		return mcpspec.ListToolsResult{Tools: []json.RawMessage{}, Meta: meta}, list.Encoded, nil
	}
	tools := list.Tools
	if tools == nil {
		tools = []json.RawMessage{}
	}
	for _, t := range tools {
		if !json.Valid(t) {
			c.log.Error("tools/list: the turn returned a tool that is not JSON")
			return mcpspec.ListToolsResult{}, nil, rpcwire.InternalError()
		}
	}
	return mcpspec.ListToolsResult{Tools: tools, Meta: meta}, nil, nil
}

// toolsResult is out as the answer's result. With encoded, out's tools are empty and
// the encoded array takes their place in out's encoding: the catalogue's tools are
// not encoded again per request (rpcwire.Result still checks and compacts the result
// once, as it does every raw result).
func toolsResult(out mcpspec.ListToolsResult, encoded json.RawMessage) (any, *jsonrpc.Error) {
	if encoded == nil {
		return out, nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, rpcwire.InternalError()
	}
	const empty = `"tools":[]`
	i := bytes.Index(b, []byte(empty))
	if i < 0 {
		return nil, rpcwire.InternalError()
	}
	res := make([]byte, 0, len(b)+len(encoded))
	res = append(res, b[:i+len(empty)-2]...)
	res = append(res, encoded...)
	res = append(res, b[i+len(empty):]...)
	return json.RawMessage(res), nil
}

func (c *conn) callTool(ctx context.Context, m *rpcwire.Message, peer mcpspec.Peer, modern bool) (any, *jsonrpc.Error) {
	if m.Params == nil || m.Params[0] != '{' {
		return nil, rpcwire.InvalidParams("tools/call needs an object with a tool name")
	}
	// params was strictly decoded and re-encoded by rpcwire: no duplicate or
	// case-variant members remain, so what is read here is what the policy
	// decision reads. Members are looked up by their exact names
	// (encoding/json's struct decoding would also accept "NAME"), as slices of
	// params: the arguments reach the Turn without a copy.
	var name string
	if json.Unmarshal(m.Param("name"), &name) != nil || name == "" {
		return nil, rpcwire.InvalidParams("tools/call without a tool name")
	}
	args := m.Param("arguments")
	if string(args) == "null" {
		args = nil
	}
	if args != nil && args[0] != '{' {
		return nil, rpcwire.InvalidParams("tools/call arguments must be an object")
	}
	meta := m.Param("_meta")
	if string(meta) == "null" || (meta != nil && meta[0] != '{') {
		meta = nil
	}
	req := &mcpspec.CallRequest{Name: name, Arguments: args, Meta: meta, Peer: peer}
	if modern {
		req.ProtocolVersion = mcpspec.ModernVersion
		req.InputResponses = nonNull(m.Param("inputResponses"))
		req.RequestState = nonNull(m.Param("requestState"))
	}
	res, err := c.turn.CallTool(ctx, req)
	if err != nil || res == nil {
		c.log.Error("tools/call failed", "tool", name, "err", err)
		return nil, rpcwire.InternalError()
	}
	if modern && res.ProtocolError != nil {
		pe := res.ProtocolError
		return nil, &jsonrpc.Error{Code: pe.Code, Message: pe.Message, Data: pe.Data}
	}
	out := *res
	if out.Content == nil {
		out.Content = []json.RawMessage{}
	}
	if !modern && out.ResultType != "" && out.ResultType != mcpspec.ResultComplete {
		c.log.Error("tools/call: a 2026-07-28 result type in an older session", "tool", name, "resultType", out.ResultType)
		return nil, rpcwire.InternalError()
	}
	if out.Raw != nil {
		return rawResult(c, name, out, modern)
	}
	if modern {
		switch out.ResultType {
		case "", mcpspec.ResultComplete:
			return modernCallResult{ResultType: mcpspec.ResultComplete, CallResult: out}, nil
		case mcpspec.ResultInputRequired:
			if out.InputRequests == nil && out.RequestState == nil {
				c.log.Error("tools/call: input_required without inputRequests or requestState", "tool", name)
				return nil, rpcwire.InternalError()
			}
			return inputRequiredResult{ResultType: out.ResultType, InputRequests: out.InputRequests, RequestState: out.RequestState, Meta: out.Meta}, nil
		}
		return modernCallResult{ResultType: out.ResultType, CallResult: out}, nil
	}
	return out, nil
}

// rawResult answers with a result another server wrote (mcpspec.CallResult.Raw): its
// bytes as they are, with resultType "complete" put first in the stateless revision
// when it has none.
func rawResult(c *conn, name string, out mcpspec.CallResult, modern bool) (any, *jsonrpc.Error) {
	raw := bytes.TrimSpace(out.Raw)
	if len(raw) < 2 || raw[0] != '{' {
		c.log.Error("tools/call: a raw result that is not a JSON object", "tool", name)
		return nil, rpcwire.InternalError()
	}
	if !modern || out.ResultType != "" {
		return json.RawMessage(raw), nil
	}
	rest := bytes.TrimLeft(raw[1:], " \t\r\n")
	b := make([]byte, 0, len(raw)+len(`"resultType":"complete",`))
	b = append(b, `{"resultType":"complete"`...)
	if rest[0] != '}' {
		b = append(b, ',')
	}
	return json.RawMessage(append(b, rest...)), nil
}

func nonNull(v json.RawMessage) json.RawMessage {
	if string(v) == "null" {
		return nil
	}
	return v
}

// request sends a server-to-client request through send and waits for the
// client's answer, the context, or the connection's end.
func (c *conn) request(ctx context.Context, method string, params any, send func([]byte) error) (json.RawMessage, error) {
	if !c.capable(method) {
		return nil, mcpspec.ErrPeerUnsupported
	}
	id := rpcwire.StringID(fmt.Sprintf("toolgate-%d", c.nextID.Add(1)))
	b, err := rpcwire.Request(id, method, params)
	if err != nil {
		return nil, err
	}
	key := rpcwire.IDKey(id)
	ch := make(chan *rpcwire.Message, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, mcpspec.ErrPeerUnsupported
	}
	c.pending[key] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, key)
		c.mu.Unlock()
	}()
	if err := send(b); err != nil {
		return nil, fmt.Errorf("sending %s: %w", method, err)
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case m, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("waiting for the answer to %s: %w", method, ErrSessionEnded)
		}
		if m.Error != nil {
			return nil, m.Error
		}
		return m.Result, nil
	}
}

// inflightCall is a request being answered; notifications/cancelled names it.
type inflightCall struct{ cancel context.CancelFunc }

// ErrSessionEnded is returned by Peer.Request when the session ended while the
// request was outstanding.
var ErrSessionEnded = errors.New("mcpserver: session ended")

// deliver routes a client's answer to the waiting request; answers to nothing are
// dropped.
func (c *conn) deliver(m *rpcwire.Message) {
	key := rpcwire.IDKey(m.ID)
	c.mu.Lock()
	ch := c.pending[key]
	delete(c.pending, key)
	c.mu.Unlock()
	if ch != nil {
		ch <- m
	}
}

func (c *conn) capable(method string) bool {
	need := mcpspec.CapabilityFor(method)
	if need == "" {
		return method == mcpspec.MethodPing
	}
	c.mu.Lock()
	caps, ready := c.clientCaps, c.ready
	c.mu.Unlock()
	if !ready {
		// Before notifications/initialized the server sends nothing but pings.
		return false
	}
	v, ok := rpcwire.Member(caps, need)
	return ok && string(v) != "null"
}

func (c *conn) capabilities() json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clientCaps
}

// peerFunc adapts a send function to the mcpspec.Peer interface. A nil send means the
// connection cannot carry server-to-client requests.
type peerFunc struct {
	c    *conn
	send func([]byte) error
}

func (p peerFunc) ClientCapabilities() json.RawMessage { return p.c.capabilities() }

// Notify sends a notification on the call's stream (stdio, or the SSE answer of an
// HTTP request); a JSON answer cannot carry one.
func (p peerFunc) Notify(_ context.Context, method string, params json.RawMessage) error {
	if p.send == nil {
		return mcpspec.ErrPeerUnsupported
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params,omitempty"`
	}{"2.0", method, params})
	if err != nil {
		return fmt.Errorf("encoding %s: %w", method, err)
	}
	return p.send(b)
}

func (p peerFunc) Request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	if p.send == nil {
		return nil, mcpspec.ErrPeerUnsupported
	}
	return p.c.request(ctx, method, params, p.send)
}
