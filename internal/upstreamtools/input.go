package upstreamtools

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/reqstate"
	"github.com/toolgate/toolgate/internal/rpcwire"
	"github.com/toolgate/toolgate/internal/upstream"
)

// A 2026-07-28 client in front of a session-based upstream (docs/kernel.md,
// "Upstream tools"): the upstream asks its client mid-call (elicitation/create,
// sampling/createMessage, roots/list), and a 2026-07-28 client cannot be asked — it
// gets resultType "input_required" instead and retries with inputResponses. So the
// upstream call is kept running past the request that started it: its requests are
// held, answered input_required with a requestState toolgate seals (bound to the
// principal, the tool, the arguments and an expiry, naming the held call), and the
// retry's inputResponses answer them; the retry then waits for the call's next
// requests or its result. Every round is a call the kernel authorizes and audits.

const (
	// InputTimeout is how long a held upstream call waits for the client's retry:
	// past it the call is cancelled upstream and its state refused.
	InputTimeout = 5 * time.Minute
	// maxHeld bounds the upstream calls held for a retry in this process.
	maxHeld = 256
	// gatherWindow is how long a round waits, after the upstream's first request,
	// for others it sends at once (a server fulfilling several input requests sends
	// them together), so that they reach the client in one round.
	gatherWindow = 25 * time.Millisecond
)

var (
	inputStatePrefix = "tgu1."
	inputStateAAD    = []byte("toolgate/upstream-input/requestState/v1")
)

// inputState is the sealed content of an upstream call's requestState.
type inputState struct {
	Principal string `json:"p"`
	Tool      string `json:"t"`
	Args      []byte `json:"a"` // SHA-256 of the canonical arguments
	Held      string `json:"h"` // the held call
	Expires   int64  `json:"e"` // Unix milliseconds
}

// heldCall is one upstream call kept running across rounds.
type heldCall struct {
	cancel context.CancelFunc
	done   chan callOutcome  // the call's result, once
	asks   chan *upstreamAsk // the upstream's requests to the client
	server string
	mu     sync.Mutex
	// missing is a client capability the upstream asked for and the round's request
	// did not declare: the call is answered -32021.
	missing string
	// peer is the current round's caller: its capabilities decide what the upstream
	// may ask, its stream takes the call's progress and log messages.
	peer mcpspec.Peer
	// open are the asks of the last round, by key, awaiting inputResponses.
	open map[string]*upstreamAsk
	seq  int
}

type callOutcome struct {
	res json.RawMessage
	err error
}

// upstreamAsk is one request of the upstream's, held until the client answers.
type upstreamAsk struct {
	method string
	params json.RawMessage
	answer chan json.RawMessage
}

// held are this process's held calls, by id.
var held = struct {
	sync.Mutex
	m map[string]*heldCall
}{m: map[string]*heldCall{}}

// callModern runs a 2026-07-28 call: a new one, or the retry of a held one.
func callModern(ctx context.Context, up Caller, server, raw string, c *kernel.Call) (*kernel.Output, error) {
	var h *heldCall
	if len(c.RequestState) > 0 {
		var err error
		if h, err = resume(c); err != nil {
			return nil, err
		}
	} else {
		h = start(up, server, raw, c)
	}
	return h.round(ctx, c)
}

// start sends the call upstream on a context of its own (the request that started it
// may end before the call does), answering the upstream's requests through asks.
func start(up Caller, server, raw string, c *kernel.Call) *heldCall {
	cctx, cancel := context.WithTimeout(context.Background(), InputTimeout)
	// The call's own context still says whose call it is: the upstream's requests
	// during it are authorized for that principal (App.UpstreamRequests).
	cctx = context.WithValue(cctx, originKey{}, Origin{Principal: c.Principal, TurnID: c.TurnID, Peer: c.Peer})
	h := &heldCall{cancel: cancel, done: make(chan callOutcome, 1), asks: make(chan *upstreamAsk), server: server, peer: c.Peer}
	current := func() mcpspec.Peer {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.peer
	}
	token := progressToken(c.Meta)
	opts := host.CallOptions{SessionKey: c.TurnID}
	notify := func(method string, p json.RawMessage) {
		// Best effort: a round whose caller cannot take notifications loses nothing else.
		if n, ok := current().(mcpspec.Notifier); ok {
			_ = n.Notify(cctx, method, p)
		}
	}
	opts.Notify = notify
	if token != nil {
		opts.Progress = func(p json.RawMessage) { notify(mcpspec.NotificationProgress, p) }
	}
	opts.Request = func(rctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
		caps := current().ClientCapabilities()
		if need := mcpspec.CapabilityFor(method); need == "" || !hasMember(caps, need) {
			if need != "" {
				h.mu.Lock()
				h.missing = need
				h.mu.Unlock()
			}
			return nil, &upstream.RPCError{Code: jsonrpc.CodeMethodNotFound, Message: "the client did not declare " + method}
		}
		a := &upstreamAsk{method: method, params: bytes.Clone(params), answer: make(chan json.RawMessage, 1)}
		select {
		case h.asks <- a:
		case <-rctx.Done():
			return nil, rctx.Err()
		}
		select {
		case r := <-a.answer:
			return r, nil
		case <-rctx.Done():
			return nil, rctx.Err()
		}
	}
	params := Params(raw, c.Arguments, token)
	go func() {
		res, err := up.Call(cctx, server, "tools/call", params, opts)
		h.done <- callOutcome{res, err}
	}()
	return h
}

// round waits for the call's result or its next requests. Requests end the round
// with input_required and a state naming the held call; the result ends the call.
// A caller that goes away while nothing is held cancels the call upstream.
func (h *heldCall) round(ctx context.Context, c *kernel.Call) (*kernel.Output, error) {
	select {
	case o := <-h.done:
		h.cancel()
		h.mu.Lock()
		missing := h.missing
		h.mu.Unlock()
		if missing != "" {
			data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{missing: map[string]any{}}})
			return &kernel.Output{ProtocolError: &mcpspec.ProtocolError{Code: mcpspec.CodeMissingClientCapability,
				Message: "the tool asked for the client capability " + strconv.Quote(missing) + ", which this request's clientCapabilities do not declare",
				Data:    data}}, nil
		}
		if o.err != nil {
			return nil, asError(h.server, o.err)
		}
		return &kernel.Output{Result: o.res}, nil
	case a := <-h.asks:
		asks := []*upstreamAsk{a}
		t := time.NewTimer(gatherWindow)
	gather:
		for {
			select {
			case a := <-h.asks:
				asks = append(asks, a)
			case <-t.C:
				break gather
			}
		}
		return h.ask(c, asks)
	case <-ctx.Done():
		h.cancel()
		return nil, ctx.Err()
	}
}

// ask holds the call and answers input_required for asks.
func (h *heldCall) ask(c *kernel.Call, asks []*upstreamAsk) (*kernel.Output, error) {
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	hid := hex.EncodeToString(id)
	held.Lock()
	if len(held.m) >= maxHeld {
		held.Unlock()
		h.cancel()
		return nil, kernel.Failed(kernel.CodeToolFailed, "too many upstream calls are waiting for input; retry later").WithRetryable(true)
	}
	held.m[hid] = h
	held.Unlock()
	time.AfterFunc(InputTimeout, func() { forget(hid, h) })

	reqs := map[string]json.RawMessage{}
	h.mu.Lock()
	h.open = map[string]*upstreamAsk{}
	for _, a := range asks {
		h.seq++
		key := "upstream-" + strconv.Itoa(h.seq)
		h.open[key] = a
		m, _ := json.Marshal(a.method)
		p := a.params
		if len(p) == 0 {
			p = json.RawMessage(`{}`)
		}
		reqs[key] = json.RawMessage(`{"method":` + string(m) + `,"params":` + string(p) + `}`)
	}
	h.mu.Unlock()
	b, err := json.Marshal(reqs)
	if err != nil {
		return nil, fmt.Errorf("encoding the upstream's input requests: %w", err)
	}
	st, err := reqstate.Process().Seal(inputStatePrefix, inputStateAAD, inputState{
		Principal: c.Principal, Tool: c.Tool.ID, Args: argsDigest(c.Arguments), Held: hid,
		Expires: time.Now().Add(InputTimeout).UnixMilli(),
	})
	if err != nil {
		return nil, err
	}
	sb, _ := json.Marshal(st)
	return &kernel.Output{InputRequests: b, RequestState: sb}, nil
}

// forget drops a held call that was not resumed in time, cancelling it upstream.
func forget(id string, h *heldCall) {
	held.Lock()
	if held.m[id] == h {
		delete(held.m, id)
		held.Unlock()
		h.cancel()
		return
	}
	held.Unlock()
}

// resume checks a retry's requestState and answers the held call's requests with its
// inputResponses. A state that fails a check is invalid_request_state; a retry that
// leaves a request unanswered is asked it again.
func resume(c *kernel.Call) (*heldCall, error) {
	refuse := func(why string) error {
		return kernel.Failed(kernel.CodeInvalidRequestState, "requestState %s; call the tool again without it", why).WithRetryable(false)
	}
	var token string
	if json.Unmarshal(c.RequestState, &token) != nil {
		return nil, refuse("must be the string toolgate issued")
	}
	var st inputState
	if err := reqstate.Process().Open(inputStatePrefix, inputStateAAD, token, &st); err != nil {
		return nil, refuse("was not issued by this toolgate process or was altered")
	}
	switch {
	case st.Principal != c.Principal:
		return nil, refuse("was issued to another principal")
	case st.Tool != c.Tool.ID:
		return nil, refuse("was issued for another tool")
	case !bytes.Equal(st.Args, argsDigest(c.Arguments)):
		return nil, refuse("was issued for other arguments")
	case time.Now().UnixMilli() > st.Expires:
		return nil, refuse("expired")
	}
	held.Lock()
	h := held.m[st.Held]
	delete(held.m, st.Held) // one retry per state: a replay finds nothing
	held.Unlock()
	if h == nil {
		return nil, refuse("names an upstream call that is over (answered, expired or already resumed)")
	}
	h.mu.Lock()
	h.peer = c.Peer
	open := h.open
	h.open = nil
	h.mu.Unlock()
	var again []*upstreamAsk
	for key, a := range open {
		r, ok := rpcwire.Member(c.InputResponses, key)
		if !ok || len(r) == 0 || r[0] != '{' {
			again = append(again, a)
			continue
		}
		a.answer <- bytes.Clone(r)
	}
	if len(again) > 0 {
		// Asked again in the next round, before anything the upstream sends next.
		go func() {
			for _, a := range again {
				select {
				case h.asks <- a:
				case <-time.After(InputTimeout):
					return
				}
			}
		}()
	}
	return h, nil
}

func argsDigest(args json.RawMessage) []byte {
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	sum := sha256.Sum256(args)
	return sum[:]
}

func hasMember(obj json.RawMessage, name string) bool {
	v, ok := rpcwire.Member(obj, name)
	return ok && string(v) != "null"
}
