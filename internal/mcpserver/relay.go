package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/rpcwire"
)

// Relay is a Turn that also serves what MCP carries beside tools: resources, resource
// templates, prompts, completions and logging, answered by the upstream servers
// behind it (docs/http-contract.md, "Methods"). The MCP layer decides nothing here
// either: it hands the request over and writes the answer's bytes as they are.
type Relay interface {
	// RelayCapabilities returns the server capabilities the turn has something behind,
	// as a JSON object of capability members ({"prompts":{},"resources":{…}}), or nil
	// for none: for a 2026-07-28 request when modern (which has no resource
	// subscriptions here: subscriptions/listen is not served), else for initialize.
	// It must not change over the Turn's life; initialize and server/discover
	// advertise it beside tools.
	RelayCapabilities(modern bool) json.RawMessage
	// Relay answers one request of a relayed method (RelayedMethods). params is the
	// request's params as strictly decoded; modern is true for a 2026-07-28 request.
	// The result must be one JSON object and is the answer's result as it is. An
	// error that is a *jsonrpc.Error is answered as that error (an upstream's, or a
	// refusal: -32602 for an item the caller may not see); any other one is -32603
	// with no details.
	Relay(ctx context.Context, method string, params json.RawMessage, modern bool, peer mcpspec.Peer) (json.RawMessage, error)
}

// RelayedMethods are the methods a Relay answers; elsewhere they are -32601.
var RelayedMethods = []string{
	mcpspec.MethodResourcesList, mcpspec.MethodResourcesTemplatesList, mcpspec.MethodResourcesRead,
	mcpspec.MethodResourcesSubscribe, mcpspec.MethodResourcesUnsubscribe,
	mcpspec.MethodPromptsList, mcpspec.MethodPromptsGet,
	mcpspec.MethodCompletionComplete, mcpspec.MethodLoggingSetLevel,
}

// modernRelayed are the relayed methods of the 2026-07-28 revision, which dropped
// resource subscriptions (subscriptions/listen replaces them) and logging/setLevel.
var modernRelayed = []string{
	mcpspec.MethodResourcesList, mcpspec.MethodResourcesTemplatesList, mcpspec.MethodResourcesRead,
	mcpspec.MethodPromptsList, mcpspec.MethodPromptsGet, mcpspec.MethodCompletionComplete,
}

// relayedList are the relayed list methods: their 2026-07-28 results carry the cache
// hints.
var relayedList = []string{mcpspec.MethodResourcesList, mcpspec.MethodResourcesTemplatesList, mcpspec.MethodPromptsList}

// asRelay returns the Relay behind t (a bridge's sessions share its turn through a
// wrapper).
func asRelay(t Turn) (Relay, bool) {
	if s, ok := t.(sharedTurn); ok {
		t = s.Turn
	}
	r, ok := t.(Relay)
	return r, ok
}

func isRelayed(method string) bool { return slices.Contains(RelayedMethods, method) }

// capabilitiesJSON is the capabilities object initialize and server/discover send:
// tools, then the Relay's members.
// listChanged is true for a list whose changes reach the session (initialize of
// a session whose GET stream delivers them; getstream.go).
func (c *conn) capabilitiesJSON(modern bool) json.RawMessage {
	var pushed ListKind
	if !modern {
		c.mu.Lock()
		v := c.version
		c.mu.Unlock()
		pushed = c.pushedLists(v)
	}
	tools := `{"tools":{"listChanged":` + strconv.FormatBool(pushed&ToolsList != 0) + `}`
	r, ok := asRelay(c.turn)
	if !ok {
		return json.RawMessage(tools + "}")
	}
	extra := advertiseListChanged(bytes.TrimSpace(r.RelayCapabilities(modern)), pushed)
	if len(extra) < 2 || extra[0] != '{' || !json.Valid(extra) {
		return json.RawMessage(tools + "}")
	}
	inner := bytes.TrimSpace(extra[1 : len(extra)-1])
	if len(inner) == 0 {
		return json.RawMessage(tools + "}")
	}
	return json.RawMessage(tools + "," + string(inner) + "}")
}

// relay answers a relayed method through the turn; -32601 when the turn relays
// nothing.
func (c *conn) relay(ctx context.Context, m *rpcwire.Message, modern bool, peer mcpspec.Peer) (any, *jsonrpc.Error) {
	r, ok := asRelay(c.turn)
	if !ok || len(bytes.TrimSpace(r.RelayCapabilities(modern))) == 0 {
		// A turn with nothing behind any relayed capability serves none of them. One
		// that relays something answers every relayed method, so that a read of an
		// item the caller may not see is decided and audited (and reads as missing).
		return nil, rpcwire.MethodNotFound(m.Method)
	}
	params := m.Params
	if params != nil && params[0] != '{' {
		return nil, rpcwire.InvalidParams(m.Method + " params must be an object")
	}
	res, err := r.Relay(ctx, m.Method, params, modern, peer)
	if err != nil {
		var je *jsonrpc.Error
		if errors.As(err, &je) {
			return nil, je
		}
		if ctx.Err() == nil {
			c.log.Error("relaying a request", "method", m.Method, "err", err)
		}
		return nil, rpcwire.InternalError()
	}
	res = bytes.TrimSpace(res)
	if len(res) < 2 || res[0] != '{' {
		c.log.Error("relaying a request: the result is not a JSON object", "method", m.Method)
		return nil, rpcwire.InternalError()
	}
	if !modern {
		return json.RawMessage(res), nil
	}
	var front []byte
	if _, has := rpcwire.Member(res, "resultType"); !has {
		front = append(front, `"resultType":"complete",`...)
	}
	if slices.Contains(relayedList, m.Method) {
		if _, has := rpcwire.Member(res, "ttlMs"); !has {
			front = append(front, `"ttlMs":`+strconv.Itoa(listTTLMs)+`,`...)
		}
		if _, has := rpcwire.Member(res, "cacheScope"); !has {
			front = append(front, `"cacheScope":"`+mcpspec.CacheScopePrivate+`",`...)
		}
	}
	return json.RawMessage(spliceFront(res, front)), nil
}

// spliceFront puts members (each followed by a comma) first in the object obj,
// leaving every byte of obj's own members as it was.
func spliceFront(obj, members []byte) []byte {
	if len(members) == 0 {
		return obj
	}
	rest := bytes.TrimLeft(obj[1:], " \t\r\n")
	b := make([]byte, 0, len(obj)+len(members))
	b = append(b, '{')
	if rest[0] == '}' {
		members = members[:len(members)-1] // no member follows: drop the last comma
	}
	b = append(b, members...)
	return append(b, rest...)
}

// advertiseListChanged sets listChanged in the prompts and resources members of a
// Relay's capabilities for the lists pushed; every other byte stays.
func advertiseListChanged(caps []byte, pushed ListKind) []byte {
	for _, m := range []struct {
		member string
		kind   ListKind
	}{{"prompts", PromptsList}, {"resources", ResourcesList}} {
		if pushed&m.kind == 0 {
			continue
		}
		if v, ok := rpcwire.Member(caps, m.member); ok && bytes.Contains(v, []byte(`"listChanged":false`)) {
			nv := bytes.Replace(v, []byte(`"listChanged":false`), []byte(`"listChanged":true`), 1)
			caps = bytes.Replace(caps, v, nv, 1)
		}
	}
	return caps
}
