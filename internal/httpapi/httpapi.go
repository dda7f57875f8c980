// Package httpapi is toolgate's HTTP API for your own code: GET /v1/tools lists the
// caller's effective catalogue and POST /v1/tools/invoke calls one tool. It is a
// surface, not a decision point: each request opens a turn on the kernel for the
// authenticated principal, so the list is exactly what tools/list returns and an invoke
// is exactly the ToolCall a tools/call would make, with the same result object.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/toolgate/toolgate/internal/httpwire"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/rpcwire"
)

// Turn is what the API needs from a kernel turn (*kernel.Turn, through the app).
type Turn interface {
	ListTools(ctx context.Context) (*mcpspec.ToolList, error)
	CallTool(ctx context.Context, req *mcpspec.CallRequest) (*mcpspec.CallResult, error)
	Close() error
}

// Options configures the API handler.
type Options struct {
	// Authenticate maps a bearer token to a principal. Required: the API never serves
	// an anonymous caller.
	Authenticate func(token string, present bool) (principal string, ok bool)
	// OpenTurn opens one turn for principal (one per request).
	OpenTurn func(ctx context.Context, principal string) (Turn, error)
	// MaxBodyBytes caps an invoke body (default DefaultMaxBodyBytes); larger is 413.
	MaxBodyBytes int64
	// Logger receives internal failures; nil discards.
	Logger *slog.Logger
}

// DefaultMaxBodyBytes is the invoke body limit, the same as an MCP message's.
const DefaultMaxBodyBytes = rpcwire.MaxMessageBytes

// Paths served.
const (
	PathTools  = "/v1/tools"
	PathInvoke = "/v1/tools/invoke"
)

// New returns a handler serving GET /v1/tools and POST /v1/tools/invoke. Other methods
// on those paths are answered 405 with an Allow header by the mux.
func New(opts Options) (http.Handler, error) {
	if opts.Authenticate == nil || opts.OpenTurn == nil {
		return nil, errors.New("httpapi: Authenticate and OpenTurn are required")
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	a := &api{opts}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathTools, a.list)
	mux.HandleFunc("POST "+PathInvoke, a.invoke)
	return mux, nil
}

type api struct{ opts Options }

// Every answer is "Cache-Control: no-store": a catalogue and a result are the caller's
// alone. Every non-200 answer is a row of the one refusal table (internal/httpwire),
// {"error": code[, "message"]}.

func writeError(w http.ResponseWriter, r httpwire.Refusal, msg string) {
	w.Header().Set("Cache-Control", "no-store")
	httpwire.Write(w, r, msg)
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, httpwire.Internal, "")
		return
	}
	writeBody(w, b)
}

func writeBody(w http.ResponseWriter, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// authenticate answers 401 unless the bearer token (httpwire.Bearer) names a
// principal.
func (a *api) authenticate(w http.ResponseWriter, r *http.Request) (string, bool) {
	tok, present, ok := httpwire.Bearer(r)
	principal, known := "", false
	if ok {
		principal, known = a.opts.Authenticate(tok, present)
	}
	if !known {
		writeError(w, httpwire.Unauthorized, "")
		return "", false
	}
	return principal, true
}

// open opens the principal's turn; it has answered when ok is false.
func (a *api) open(w http.ResponseWriter, r *http.Request, principal string) (Turn, bool) {
	t, err := a.opts.OpenTurn(r.Context(), principal)
	if err != nil {
		a.opts.Logger.Error("httpapi: opening a turn", "principal", principal, "err", err)
		writeError(w, httpwire.CatalogUnavailable, "the catalogue could not be resolved; see the server log")
		return nil, false
	}
	return t, true
}

func (a *api) list(w http.ResponseWriter, r *http.Request) {
	principal, ok := a.authenticate(w, r)
	if !ok {
		return
	}
	t, ok := a.open(w, r, principal)
	if !ok {
		return
	}
	defer t.Close()
	l, err := t.ListTools(r.Context())
	if err != nil {
		a.opts.Logger.Error("httpapi: listing tools", "err", err)
		writeError(w, httpwire.Internal, "")
		return
	}
	tools := l.Tools
	if tools == nil {
		tools = []json.RawMessage{}
	}
	// The body of GET /v1/tools: the same object tools/list returns.
	writeJSON(w, mcpspec.ListToolsResult{Tools: tools, Meta: map[string]any{
		mcpspec.MetaCatalogHash: l.CatalogHash,
		mcpspec.MetaExecutionID: l.ExecutionID,
	}})
}

// InvokeRequest is the body of POST /v1/tools/invoke, the params of a tools/call.
type InvokeRequest struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

func (a *api) invoke(w http.ResponseWriter, r *http.Request) {
	principal, ok := a.authenticate(w, r)
	if !ok {
		return
	}
	req, ref, msg := a.decodeInvoke(w, r)
	if req == nil {
		writeError(w, ref, msg)
		return
	}
	t, ok := a.open(w, r, principal)
	if !ok {
		return
	}
	defer t.Close()
	res, err := t.CallTool(r.Context(), &mcpspec.CallRequest{Name: req.Name, Arguments: req.Arguments, Peer: mcpspec.NoPeer{}})
	if err != nil {
		a.opts.Logger.Error("httpapi: calling a tool", "err", err)
		writeError(w, httpwire.Internal, "")
		return
	}
	if res.Raw != nil {
		// Another server's result, passed through as it wrote it.
		writeBody(w, res.Raw)
		return
	}
	if res.Content == nil {
		res.Content = []json.RawMessage{}
	}
	writeJSON(w, res)
}

// decodeInvoke reads the body with the same strict decoder MCP messages go through
// (duplicate and case-variant members refused at every depth, size and depth limits),
// once, so an invoke cannot mean something a tools/call would not.
func (a *api) decodeInvoke(w http.ResponseWriter, r *http.Request) (*InvokeRequest, httpwire.Refusal, string) {
	body, err := httpwire.ReadBody(w, r, a.opts.MaxBodyBytes)
	if err != nil {
		if httpwire.IsTooLarge(err) {
			return nil, httpwire.TooLarge, fmt.Sprintf("body is larger than %d bytes", a.opts.MaxBodyBytes)
		}
		return nil, httpwire.InvalidRequest, "could not read the body"
	}
	// One strict read, no tree: the body is a tools/call's params, which sit one level
	// inside a message, so it may nest one level less than a message.
	canon, err := rpcwire.Limits{MaxBytes: int(a.opts.MaxBodyBytes), MaxDepth: rpcwire.MaxDepth - 1}.Canonical(body)
	if err != nil {
		return nil, httpwire.InvalidRequest, strings.TrimPrefix(err.Error(), "decoding JSON: ")
	}
	if canon[0] != '{' {
		return nil, httpwire.InvalidRequest, "body must be one JSON object {\"name\", \"arguments\"}"
	}
	// Members are matched by their exact names, never encoding/json's case-insensitive
	// field matching: {"NAME": …} is an unknown member here exactly as tools/call
	// ignores it, so a filter reading "name" and this API never disagree. The
	// arguments are a slice of the canonical encoding, which the kernel reads once.
	var req InvokeRequest
	for k, v := range rpcwire.Members(canon) {
		switch k {
		case "name":
			if err := json.Unmarshal(v, &req.Name); err != nil {
				return nil, httpwire.InvalidRequest, "name must be a string"
			}
		case "arguments":
			req.Arguments = v
		default:
			return nil, httpwire.InvalidRequest, fmt.Sprintf("unknown member %q: the body is {\"name\": string, \"arguments\": object}", k)
		}
	}
	if req.Name == "" {
		return nil, httpwire.InvalidRequest, "name is required"
	}
	if a := req.Arguments; len(a) > 0 && a[0] != '{' && string(a) != "null" {
		return nil, httpwire.InvalidRequest, "arguments must be a JSON object"
	}
	return &req, httpwire.Refusal{}, ""
}
