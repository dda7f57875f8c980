package host

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
)

// What an upstream says to the client in the middle of a call — its requests
// (sampling/createMessage, elicitation/create, roots/list) and its log messages — has
// no id tying it to the call on a connection shared by several. The host gives it to
// the call in flight on that connection when there is exactly one with a handler
// (CallOptions.Request, CallOptions.Notify); with several, or none, a request is
// refused (ErrNoRequestTarget) and a log message dropped, so one caller's upstream
// never asks or tells another caller anything. A "session" server's connection serves
// one caller session, which makes the rule exact for the calls of one turn that do
// not overlap.

// ErrNoRequestTarget answers an upstream request made on a connection where no single
// call in flight can answer it; the upstream gets -32603.
var ErrNoRequestTarget = errors.New("host: no single call in flight can answer the upstream's request")

// router holds the calls in flight on one connection that take the upstream's
// requests or notifications.
type router struct {
	mu    sync.Mutex
	calls map[*CallOptions]struct{}
}

// add registers opts until the returned func is called.
func (rt *router) add(opts *CallOptions) (remove func()) {
	rt.mu.Lock()
	if rt.calls == nil {
		rt.calls = map[*CallOptions]struct{}{}
	}
	rt.calls[opts] = struct{}{}
	rt.mu.Unlock()
	return func() {
		rt.mu.Lock()
		delete(rt.calls, opts)
		rt.mu.Unlock()
	}
}

// only returns the one registered call for which has is true, or nil.
func (rt *router) only(has func(*CallOptions) bool) *CallOptions {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	var one *CallOptions
	for o := range rt.calls {
		if has(o) {
			if one != nil {
				return nil
			}
			one = o
		}
	}
	return one
}

// request answers an upstream's request through the one call that can.
func (rt *router) request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	o := rt.only(func(o *CallOptions) bool { return o.Request != nil })
	if o == nil {
		return nil, ErrNoRequestTarget
	}
	return o.Request(ctx, method, params)
}

// notify gives a notification of the call's (notifications/message) to the one call
// that takes them; it returns at once (the handler must too).
func (rt *router) notify(method string, params json.RawMessage) {
	if o := rt.only(func(o *CallOptions) bool { return o.Notify != nil }); o != nil {
		o.Notify(method, params)
	}
}

// notificationMessage is MCP's log message notification (the host imports no MCP
// vocabulary of toolgate's).
const notificationMessage = "notifications/message"
