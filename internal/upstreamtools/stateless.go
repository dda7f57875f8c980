package upstreamtools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/reqstate"
	"github.com/toolgate/toolgate/internal/rpcwire"
	"github.com/toolgate/toolgate/internal/upstream"
)

// A 2026-07-28 client in front of an upstream that speaks 2026-07-28 too (docs/kernel.md,
// "Upstream tools"; docs/host.md, "Eras"): the request goes to the server's stateless
// connection as that caller's own request — its client capabilities (less what the
// grants do not let the server ask that principal), its _meta, its inputResponses —
// and the server's input_required result comes back with the server's own
// inputRequests, keys and all. The server's requestState never reaches the caller as
// it is: toolgate seals it inside a state of its own, bound to the principal, the
// request's subject (the tool, prompt or resource), the arguments, the keys the server
// asked and an expiry, so a caller can neither alter it nor use it for another
// principal, subject or arguments, nor answer keys the server did not ask; the
// server sees exactly its own state back. Every round is a request the kernel
// authorizes and audits, like any other.

const (
	// MaxUpstreamState bounds the requestState an upstream may hand out through
	// toolgate: a larger one fails the request (the sealed state travels in every
	// retry).
	MaxUpstreamState = 16 << 10
	// maxInputKeys bounds the inputRequests of one round, and maxKeyLen one key.
	maxInputKeys = 64
	maxKeyLen    = 256
	// maxSealedState bounds a sealed stateless state before it is decoded: the
	// upstream's state and keys, JSON-escaped, plus the seal's overhead.
	maxSealedState = 4*MaxUpstreamState + 4*maxInputKeys*maxKeyLen
)

var (
	statelessStatePrefix = "tgs1."
	statelessStateAAD    = []byte("toolgate/upstream-stateless/requestState/v1")
)

// statelessState is the sealed content of a requestState toolgate hands a caller for
// an upstream's input round.
type statelessState struct {
	Principal string   `json:"p"`
	Subject   string   `json:"t"`
	Args      []byte   `json:"a"` // SHA-256 of the canonical arguments
	Expires   int64    `json:"e"` // Unix milliseconds
	Keys      []string `json:"k"` // the inputRequests keys the upstream asked
	// State is the upstream's own requestState (a JSON string's bytes), nil when it
	// gave none.
	State json.RawMessage `json:"s,omitempty"`
}

// RequestPolicy decides what an upstream server may ask a principal's client through
// an input round (elicitation/create, sampling/createMessage, roots/list), as for its
// requests mid-call (docs/trust.md, "Requests from servers").
type RequestPolicy interface {
	// May reports, recording nothing, whether server may ask principal's client for
	// method: a client capability the server may not use is not declared to it.
	May(server, principal, method string) bool
	// Record decides one input request of server's for principal's request and audits
	// it; nil allows it.
	Record(ctx context.Context, server, principal, turnID, method string) error
}

// Exchange is one 2026-07-28 request (tools/call, prompts/get, resources/read) relayed
// on an upstream's stateless connection.
type Exchange struct {
	Server    string
	Principal string
	TurnID    string
	// Subject names what the request is for (a tool id, "prompt:<name>",
	// "resource:<uri>"): a state issued for one is refused for another.
	Subject string
	// Args are the bytes the state is bound to beside the principal and subject (the
	// tool's or the prompt's arguments, canonical).
	Args json.RawMessage
	// Params are the request's params as the caller sent them; Peer is its caller.
	Params json.RawMessage
	Peer   mcpspec.Peer
	// Policy decides the inputs the upstream asks for; nil allows every kind the
	// caller declared.
	Policy RequestPolicy
}

// errStateRefused is a stateless state that does not open or does not fit the request.
func errStateRefused(why string) *mcpspec.ProtocolError {
	return &mcpspec.ProtocolError{Code: jsonrpc.CodeInvalidParams,
		Message: "requestState " + why + "; send the request again without it"}
}

// Round sends x upstream statelessly. ok is false when the server does not speak the
// 2026-07-28 revision (or the relay carries no stateless request) and the request
// carries no stateless state of toolgate's: the caller takes the legacy path. Else
// exactly one of res (the upstream's complete result, its bytes unchanged), in
// (inputRequests and requestState for the caller), perr (a JSON-RPC error for the
// caller: the upstream's own, or a refused state) and err is set.
func (x *Exchange) Round(ctx context.Context, up Caller, method string) (r StatelessResult, ok bool) {
	state, _ := rpcwire.Member(x.Params, "requestState")
	ours := len(state) > 0 && string(state) != "null"
	var st statelessState
	if ours {
		if perr := x.open(state, &st); perr != nil {
			return StatelessResult{ProtocolError: perr}, true
		}
	}
	caps := x.declared()
	params, err := x.upstreamParams(st)
	if err != nil {
		return StatelessResult{Err: err}, true
	}
	opts := host.CallOptions{SessionKey: x.TurnID, Stateless: &host.Stateless{Capabilities: caps}}
	if n, isN := x.Peer.(mcpspec.Notifier); isN {
		opts.Notify = func(m string, p json.RawMessage) { _ = n.Notify(context.WithoutCancel(ctx), m, p) }
		if meta, _ := rpcwire.Member(params, "_meta"); meta != nil {
			if _, has := rpcwire.Member(meta, "progressToken"); has {
				opts.Progress = func(p json.RawMessage) {
					_ = n.Notify(context.WithoutCancel(ctx), mcpspec.NotificationProgress, p)
				}
			}
		}
	}
	res, err := up.Call(ctx, x.Server, method, params, opts)
	if errors.Is(err, host.ErrNotStateless) {
		if ours {
			return StatelessResult{ProtocolError: errStateRefused("was issued for a server that no longer speaks 2026-07-28")}, true
		}
		return StatelessResult{}, false
	}
	var re *upstream.RPCError
	switch {
	case errors.As(err, &re):
		return StatelessResult{ProtocolError: &mcpspec.ProtocolError{Code: re.Code, Message: re.Message, Data: re.Data}}, true
	case err != nil:
		return StatelessResult{Err: err}, true
	}
	return x.finish(ctx, res, caps), true
}

// StatelessResult is what Round made of the upstream's answer.
type StatelessResult struct {
	Result        json.RawMessage
	InputRequests json.RawMessage
	RequestState  json.RawMessage
	ProtocolError *mcpspec.ProtocolError
	Err           error
}

// open checks the caller's requestState against x.
func (x *Exchange) open(raw json.RawMessage, st *statelessState) *mcpspec.ProtocolError {
	var token string
	if json.Unmarshal(raw, &token) != nil {
		return errStateRefused("must be the string toolgate issued")
	}
	if err := reqstate.Process().OpenMax(statelessStatePrefix, statelessStateAAD, token, maxSealedState, st); err != nil {
		return errStateRefused("was not issued by this toolgate process or was altered")
	}
	switch {
	case st.Principal != x.Principal:
		return errStateRefused("was issued to another principal")
	case st.Subject != x.Subject:
		return errStateRefused("was issued for another request")
	case !bytes.Equal(st.Args, argsDigest(x.Args)):
		return errStateRefused("was issued for other arguments")
	case time.Now().UnixMilli() > st.Expires:
		return errStateRefused("expired")
	}
	return nil
}

// declared is the caller's client capabilities less the input kinds the policy does
// not let the server ask this principal for.
func (x *Exchange) declared() json.RawMessage {
	caps := x.Peer.ClientCapabilities()
	if len(caps) == 0 || caps[0] != '{' {
		return json.RawMessage(`{}`)
	}
	if x.Policy == nil {
		return caps
	}
	var drop []string
	for _, m := range []string{mcpspec.MethodElicitationCreate, mcpspec.MethodSamplingCreateMessage, mcpspec.MethodRootsList} {
		if name := mcpspec.CapabilityFor(m); hasMember(caps, name) && !x.Policy.May(x.Server, x.Principal, m) {
			drop = append(drop, name)
		}
	}
	if len(drop) == 0 {
		return caps
	}
	return setMembers(caps, drop, nil)
}

// upstreamParams are the params sent upstream: the caller's, with its inputResponses
// limited to the keys the upstream asked (none without a state of toolgate's), the
// upstream's own requestState in place of toolgate's, and _meta without toolgate's
// own members (the connection sets the revision's).
func (x *Exchange) upstreamParams(st statelessState) (json.RawMessage, error) {
	var add [][2]json.RawMessage
	if resp, ok := rpcwire.Member(x.Params, "inputResponses"); ok && len(st.Keys) > 0 && len(resp) > 0 && resp[0] == '{' {
		var unasked []string
		for k := range rpcwire.Members(resp) {
			if !slices.Contains(st.Keys, k) {
				unasked = append(unasked, k)
			}
		}
		if kept := setMembers(resp, unasked, nil); string(kept) != "{}" {
			add = append(add, [2]json.RawMessage{json.RawMessage(`"inputResponses"`), kept})
		}
	}
	if st.State != nil {
		add = append(add, [2]json.RawMessage{json.RawMessage(`"requestState"`), st.State})
	}
	if meta, ok := rpcwire.Member(x.Params, "_meta"); ok && len(meta) > 0 && meta[0] == '{' {
		var own []string
		for k := range rpcwire.Members(meta) {
			if strings.HasPrefix(k, "toolgate/") {
				own = append(own, k)
			}
		}
		add = append(add, [2]json.RawMessage{json.RawMessage(`"_meta"`), setMembers(meta, own, nil)})
	}
	return setMembers(x.Params, []string{"inputResponses", "requestState", "_meta"}, add), nil
}

// finish reads the upstream's answer: a complete result passes unchanged; an
// input_required one is checked (every request a kind the caller declared and the
// policy allows, bounded keys and state) and its state sealed.
func (x *Exchange) finish(ctx context.Context, res json.RawMessage, caps json.RawMessage) StatelessResult {
	rt, _ := rpcwire.Member(res, "resultType")
	if string(rt) != `"`+mcpspec.ResultInputRequired+`"` {
		return StatelessResult{Result: res}
	}
	fail := func(format string, a ...any) StatelessResult {
		return StatelessResult{Err: kernel.Failed(kernel.CodeUpstreamError, "server %q: "+format, append([]any{x.Server}, a...)...).WithRetryable(false)}
	}
	reqs, _ := rpcwire.Member(res, "inputRequests")
	if len(reqs) == 0 || reqs[0] != '{' {
		return fail("its input_required result has no inputRequests object")
	}
	st := statelessState{Principal: x.Principal, Subject: x.Subject, Args: argsDigest(x.Args),
		Expires: time.Now().Add(InputTimeout).UnixMilli()}
	for key, r := range rpcwire.Members(reqs) {
		if len(st.Keys) == maxInputKeys {
			return fail("it asked for more than %d inputs in one round", maxInputKeys)
		}
		if len(key) > maxKeyLen {
			return fail("an inputRequests key is longer than %d bytes", maxKeyLen)
		}
		m, _ := stringMember(r, "method")
		need := mcpspec.CapabilityFor(m)
		if need == "" {
			return fail("inputRequests[%s] asks for %s, which is not an input request", strconv.Quote(key), strconv.Quote(m))
		}
		if !hasMember(caps, need) {
			return fail("inputRequests[%s] asks for %s, which the request did not declare (or no grant lets this server ask for)", strconv.Quote(key), m)
		}
		if x.Policy != nil {
			if err := x.Policy.Record(ctx, x.Server, x.Principal, x.TurnID, m); err != nil {
				return StatelessResult{Err: err}
			}
		}
		st.Keys = append(st.Keys, key)
	}
	if s, ok := rpcwire.Member(res, "requestState"); ok && string(s) != "null" {
		if len(s) == 0 || s[0] != '"' {
			return fail("its requestState is not a string")
		}
		if len(s) > MaxUpstreamState {
			return fail("its requestState is over %d bytes", MaxUpstreamState)
		}
		st.State = bytes.Clone(s)
	}
	token, err := reqstate.Process().Seal(statelessStatePrefix, statelessStateAAD, st)
	if err != nil {
		return StatelessResult{Err: err}
	}
	tb, _ := json.Marshal(token)
	return StatelessResult{InputRequests: bytes.Clone(reqs), RequestState: tb}
}

// setMembers is obj without the members drop names, every other member's bytes kept,
// then the members of add (each a JSON-encoded key and its value).
func setMembers(obj json.RawMessage, drop []string, add [][2]json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	if len(obj) > 0 && obj[0] == '{' {
		for k, v := range rpcwire.Members(obj) {
			if slices.Contains(drop, k) {
				continue
			}
			if n > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteByte(':')
			b.Write(v)
			n++
		}
	}
	for _, kv := range add {
		if n > 0 {
			b.WriteByte(',')
		}
		b.Write(kv[0])
		b.WriteByte(':')
		b.Write(kv[1])
		n++
	}
	b.WriteByte('}')
	return b.Bytes()
}

func stringMember(obj json.RawMessage, name string) (string, bool) {
	v, ok := rpcwire.Member(obj, name)
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// statelessOutput turns a tool's stateless round into the kernel's Output.
func statelessOutput(r StatelessResult, server string) (*kernel.Output, error) {
	var ke *kernel.Error
	switch {
	case errors.As(r.Err, &ke):
		return nil, ke
	case r.Err != nil:
		return nil, asError(server, r.Err)
	case r.ProtocolError != nil:
		return &kernel.Output{ProtocolError: r.ProtocolError}, nil
	case r.InputRequests != nil:
		return &kernel.Output{InputRequests: r.InputRequests, RequestState: r.RequestState}, nil
	}
	return &kernel.Output{Result: r.Result}, nil
}

// isStatelessState reports whether a caller's requestState is one of the stateless
// path's (rather than a held call's).
func isStatelessState(raw json.RawMessage) bool {
	var s string
	return json.Unmarshal(raw, &s) == nil && strings.HasPrefix(s, statelessStatePrefix)
}
