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
// the call in flight on that connection that has a handler (CallOptions.Request,
// CallOptions.Notify) when there is one; when there are several and all are of one
// caller session (the same non-empty CallOptions.SessionKey), to the one that started
// last (calls of one session mostly follow each other; a held 2026-07-28 call waiting
// for its retry is older than the call being made); otherwise a request is refused
// (ErrNoRequestTarget) and a log message dropped, so one caller's upstream never asks
// or tells another caller anything.

// ErrNoRequestTarget answers an upstream request made on a connection where no single
// call in flight can answer it; the upstream gets -32603.
var ErrNoRequestTarget = errors.New("host: no single call in flight can answer the upstream's request")

// router holds the calls in flight on one connection that take the upstream's
// requests or notifications.
type router struct {
	mu    sync.Mutex
	seq   uint64
	calls map[*CallOptions]uint64 // the order they were added in
}

// add registers opts until the returned func is called.
func (rt *router) add(opts *CallOptions) (remove func()) {
	rt.mu.Lock()
	if rt.calls == nil {
		rt.calls = map[*CallOptions]uint64{}
	}
	rt.seq++
	rt.calls[opts] = rt.seq
	rt.mu.Unlock()
	return func() {
		rt.mu.Lock()
		delete(rt.calls, opts)
		rt.mu.Unlock()
	}
}

// only returns the registered call for which has is true when there is one, or the
// latest of several of one caller session; nil otherwise.
func (rt *router) only(has func(*CallOptions) bool) *CallOptions {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	var (
		latest *CallOptions
		at     uint64
		n      int
		mixed  bool
	)
	for o, seq := range rt.calls {
		if !has(o) {
			continue
		}
		n++
		if latest != nil && (o.SessionKey == "" || o.SessionKey != latest.SessionKey) {
			mixed = true
		}
		if seq > at {
			latest, at = o, seq
		}
	}
	if n > 1 && (mixed || latest.SessionKey == "") {
		return nil
	}
	return latest
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
