package hostrelay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/upstream"
)

// The params and results of each method (docs/hostrelay.md, "Protocol"). Types that
// hold upstream bytes are encoded by hand (append* below); the rest with encoding/json.

type helloParams struct {
	Protocol        int `json:"protocol"`
	PID             int `json:"pid"`
	MaxMessageBytes int `json:"max_message_bytes"`
}

type helloResult struct {
	Protocol        int `json:"protocol"`
	PID             int `json:"pid"`
	MaxMessageBytes int `json:"max_message_bytes"`
	MaxInFlight     int `json:"max_in_flight"`
}

// callParams is a call's params: the upstream request and its routing.
type callParams struct {
	Server     string          `json:"server"`
	Method     string          `json:"method"`
	SessionKey string          `json:"session_key,omitempty"`
	Progress   bool            `json:"progress,omitempty"`
	TimeoutMS  int64           `json:"timeout_ms,omitempty"`
	Params     json.RawMessage `json:"params,omitempty"`
	ParamsB64  []byte          `json:"params_b64,omitempty"`
}

// appendCallParams encodes a call's params; params must be valid JSON or nil.
func appendCallParams(b []byte, server, method, key string, progress bool, timeout time.Duration, params []byte) []byte {
	b = append(b, `{"server":`...)
	b = appendString(b, server)
	b = append(b, `,"method":`...)
	b = appendString(b, method)
	if key != "" {
		b = append(b, `,"session_key":`...)
		b = appendString(b, key)
	}
	if progress {
		b = append(b, `,"progress":true`...)
	}
	if timeout > 0 {
		b = append(b, `,"timeout_ms":`...)
		b = strconv.AppendInt(b, max(timeout.Milliseconds(), 1), 10)
	}
	if params != nil {
		b = append(b, ',')
		b = appendRawMember(b, "params", params)
	}
	return append(b, '}')
}

type nameParams struct {
	Name string `json:"name"`
}

type keyParams struct {
	Key string `json:"key"`
}

type cancelParams struct {
	ID int64 `json:"id"`
}

// callResult is a call's result: the upstream's result bytes.
type callResult struct {
	Result    json.RawMessage `json:"result,omitempty"`
	ResultB64 []byte          `json:"result_b64,omitempty"`
}

func appendCallResult(b []byte, result []byte) []byte {
	b = append(b, '{')
	b = appendRawMember(b, "result", result)
	return append(b, '}')
}

// progressParams is a progress notification: a call's id and the upstream's params.
type progressParams struct {
	ID        int64           `json:"id"`
	Params    json.RawMessage `json:"params,omitempty"`
	ParamsB64 []byte          `json:"params_b64,omitempty"`
}

func appendProgress(b []byte, id int64, params []byte) []byte {
	p := append([]byte(`{"id":`), strconv.AppendInt(nil, id, 10)...)
	if params != nil {
		p = append(p, ',')
		p = appendRawMember(p, "params", params)
	}
	p = append(p, '}')
	return appendRequest(b, 0, nProgress, p)
}

// catalogResult answers catalog ("found") and refresh_catalog ("error").
type catalogResult struct {
	Found      bool            `json:"found,omitempty"`
	Catalog    json.RawMessage `json:"catalog,omitempty"`
	CatalogB64 []byte          `json:"catalog_b64,omitempty"`
	Error      *wireErr        `json:"error,omitempty"`
}

// appendCatalogResult encodes a catalog answer (c nil: none) or a refresh_catalog
// answer (found false, with err when the refresh had one).
func appendCatalogResult(b []byte, found bool, c *host.Catalog, err error) []byte {
	b = append(b, '{')
	if c == nil {
		return append(b, '}')
	}
	if found {
		b = append(b, `"found":true,`...)
	}
	b = appendRawMember(b, "catalog", appendCatalog(nil, c))
	if err != nil {
		b = append(b, `,"error":`...)
		b = append(b, marshal(toWireErr(err))...)
	}
	return append(b, '}')
}

func (r *catalogResult) catalog() (host.Catalog, error) {
	var c host.Catalog
	if err := json.Unmarshal(rawOr(r.Catalog, r.CatalogB64), &c); err != nil {
		return host.Catalog{}, fmt.Errorf("hostrelay: decoding a catalogue: %w", err)
	}
	return c, nil
}

// appendCatalog encodes c as encoding/json would with host.Catalog's tags, except that
// the raw items and handshake members are written as they are (json.Marshal would
// compact them and escape <, > and &).
func appendCatalog(b []byte, c *host.Catalog) []byte {
	b = append(b, `{"version":`...)
	b = strconv.AppendUint(b, c.Version, 10)
	b = append(b, `,"digest":`...)
	b = appendString(b, c.Digest)
	b = append(b, `,"fetched_at":`...)
	b = appendTime(b, c.FetchedAt)
	b = append(b, `,"info":{"protocolVersion":`...)
	b = appendString(b, c.Info.ProtocolVersion)
	if len(c.Info.ServerInfo) > 0 {
		b = append(b, `,"serverInfo":`...)
		b = append(b, c.Info.ServerInfo...)
	}
	if len(c.Info.Capabilities) > 0 {
		b = append(b, `,"capabilities":`...)
		b = append(b, c.Info.Capabilities...)
	}
	if c.Info.Instructions != "" {
		b = append(b, `,"instructions":`...)
		b = appendString(b, c.Info.Instructions)
	}
	b = append(b, '}')
	for _, l := range []struct {
		name  string
		items []json.RawMessage
	}{{"tools", c.Tools}, {"resources", c.Resources}, {"resource_templates", c.ResourceTemplates}, {"prompts", c.Prompts}} {
		b = append(b, `,"`...)
		b = append(b, l.name...)
		b = append(b, `":`...)
		if l.items == nil {
			b = append(b, "null"...)
			continue
		}
		b = append(b, '[')
		for i, it := range l.items {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, it...)
		}
		b = append(b, ']')
	}
	if c.Truncated {
		b = append(b, `,"truncated":true`...)
	}
	if c.Dropped != 0 {
		b = append(b, `,"dropped":`...)
		b = strconv.AppendInt(b, int64(c.Dropped), 10)
	}
	return append(b, '}')
}

func appendTime(b []byte, t time.Time) []byte {
	j, err := t.MarshalJSON()
	if err != nil { // a year outside 0–9999: not a time the host makes
		j, _ = time.Time{}.MarshalJSON()
	}
	return append(b, j...)
}

type statusResult struct {
	Found  bool         `json:"found"`
	Status *host.Status `json:"status,omitempty"`
}

// eventParams is an event notification: exactly one member is set.
type eventParams struct {
	Server  *host.ServerEvent  `json:"server,omitempty"`
	State   *host.StateEvent   `json:"state,omitempty"`
	Catalog *host.CatalogEvent `json:"catalog,omitempty"`
}

func eventLine(ev any) []byte {
	var p eventParams
	switch e := ev.(type) {
	case host.ServerEvent:
		p.Server = &e
	case host.StateEvent:
		p.State = &e
	case host.CatalogEvent:
		p.Catalog = &e
	default:
		return nil
	}
	return appendRequest(nil, 0, nEvent, marshal(p))
}

func (p *eventParams) event() (any, bool) {
	switch {
	case p.Server != nil:
		return *p.Server, true
	case p.State != nil:
		return *p.State, true
	case p.Catalog != nil:
		return *p.Catalog, true
	}
	return nil, false
}

type resyncParams struct {
	Snapshot host.Snapshot `json:"snapshot"`
}

// wireErr is the data of a codeRelay error: what kind of error, and its fields.
type wireErr struct {
	// Kind: "server" (a *host.ServerError), "rpc" (the upstream's JSON-RPC error),
	// "too_large", "busy" (too many requests in flight), "protocol" (hello refused),
	// "invalid" (bad params), "cancelled", "remote" (anything else: the message).
	Kind string `json:"kind"`

	Server    string      `json:"server,omitempty"`
	ErrorKind string      `json:"error_kind,omitempty"`
	State     host.State  `json:"state,omitempty"`
	Reason    host.Reason `json:"reason,omitempty"`
	RetryAt   *time.Time  `json:"retry_at,omitempty"`
	Cause     string      `json:"cause,omitempty"`

	Code    int64  `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	Data    []byte `json:"data_b64,omitempty"` // the upstream's error data, exact

	Size     int `json:"size,omitempty"`
	Limit    int `json:"limit,omitempty"`
	Protocol int `json:"protocol,omitempty"`
}

// serverKinds names each host error kind on the wire.
var serverKinds = []struct {
	name string
	err  error
}{
	{"unknown_server", host.ErrUnknownServer},
	{"disabled", host.ErrDisabled},
	{"auth_required", host.ErrAuthRequired},
	{"unavailable", host.ErrUnavailable},
	{"start_failed", host.ErrStartFailed},
	{"start_timeout", host.ErrStartTimeout},
	{"crashed", host.ErrCrashed},
	{"timeout", host.ErrTimeout},
	{"stopped", host.ErrStopped},
	{"session_limit", host.ErrSessionLimit},
	{"shutdown", host.ErrShutdown},
	{"invalid_definition", host.ErrInvalidDefinition},
}

func toWireErr(err error) wireErr {
	var (
		se *host.ServerError
		re *upstream.RPCError
		tl *MessageTooLargeError
	)
	switch {
	case errors.As(err, &se):
		w := wireErr{Kind: "server", Server: se.Server, State: se.State, Reason: se.Reason, ErrorKind: "unknown"}
		for _, k := range serverKinds {
			if se.Kind == k.err {
				w.ErrorKind = k.name
			}
		}
		if !se.RetryAt.IsZero() {
			t := se.RetryAt
			w.RetryAt = &t
		}
		if se.Err != nil {
			w.Cause = se.Err.Error()
		}
		return w
	case errors.As(err, &re):
		return wireErr{Kind: "rpc", Code: re.Code, Message: re.Message, Data: re.Data}
	case errors.As(err, &tl):
		return wireErr{Kind: "too_large", Size: tl.Size, Limit: tl.Limit}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return wireErr{Kind: "cancelled"}
	}
	return wireErr{Kind: "remote"}
}

// appendErrorFor appends the error response that carries err.
func appendErrorFor(b []byte, id int64, err error) []byte {
	return appendError(b, id, codeRelay, err.Error(), marshal(toWireErr(err)))
}

// appendRelayError appends an error the relay itself makes (busy, invalid …).
func appendRelayError(b []byte, id int64, kind, message string) []byte {
	return appendError(b, id, codeRelay, message, marshal(wireErr{Kind: kind}))
}

// fromWire turns an error response back into the error it carried.
func fromWire(e *jsonrpc.Error, hostPID int) error {
	if e.Code != codeRelay {
		return &RemoteError{Message: fmt.Sprintf("hostrelay: error %d: %s", e.Code, e.Message)}
	}
	var w wireErr
	if err := json.Unmarshal(e.Data, &w); err != nil {
		return &RemoteError{Message: e.Message}
	}
	return w.err(e.Message, hostPID)
}

func (w *wireErr) err(message string, hostPID int) error {
	switch w.Kind {
	case "server":
		se := &host.ServerError{Server: w.Server, State: w.State, Reason: w.Reason}
		se.Kind = errors.New(w.ErrorKind) // a kind this release does not know
		for _, k := range serverKinds {
			if k.name == w.ErrorKind {
				se.Kind = k.err
			}
		}
		if w.RetryAt != nil {
			se.RetryAt = *w.RetryAt
		}
		if w.Cause != "" {
			se.Err = &RemoteError{Message: w.Cause}
		}
		return se
	case "rpc":
		return &upstream.RPCError{Code: w.Code, Message: w.Message, Data: w.Data}
	case "too_large":
		return &MessageTooLargeError{Size: w.Size, Limit: w.Limit}
	case "protocol":
		return &ProtocolError{Ours: Protocol, Theirs: w.Protocol, HostPID: hostPID}
	}
	return &RemoteError{Message: message}
}

// validJSON reports whether b is one JSON value that may be spliced into a message.
func validJSON(b []byte) bool {
	return len(bytes.TrimSpace(b)) > 0 && json.Valid(b)
}
