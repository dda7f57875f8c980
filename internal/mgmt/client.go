package mgmt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/toolgate/toolgate/internal/rpcwire"
)

// MaxAnswerBytes caps an answer the Client reads (a details answer of a large
// catalogue is the biggest); a longer one is an error rather than unbounded memory.
const MaxAnswerBytes = 64 << 20

// Client is a Manager over a running daemon's management protocol: each method is one
// POST to /v1/rpc with a bearer token, and Subscribe opens a WebSocket. The daemon
// knows the caller from the token, so the Caller argument of every method is ignored.
// Errors the daemon answers are *Error with their stable code; a daemon that cannot be
// reached is a plain error naming its URL.
type Client struct {
	url   string
	token string
	hc    *http.Client
	id    atomic.Int64
}

// NewClient returns a Client for the daemon at base ("http://127.0.0.1:7077"; a URL
// that already ends in /v1/rpc is taken as it is). hc nil is http.DefaultClient: calls
// are bounded by their context.
func NewClient(base, token string, hc *http.Client) *Client {
	u := strings.TrimRight(base, "/")
	if !strings.HasSuffix(u, Path) {
		u += Path
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{url: u, token: token, hc: hc}
}

// URL is the endpoint the client posts to.
func (c *Client) URL() string { return c.url }

func (c *Client) List(ctx context.Context, _ Caller, p ListParams) (*ListResult, error) {
	return call[ListResult](ctx, c, MethodList, p)
}

func (c *Client) Install(ctx context.Context, _ Caller, p InstallParams) (*InstallResult, error) {
	return call[InstallResult](ctx, c, MethodInstall, p)
}

func (c *Client) SetPolicy(ctx context.Context, _ Caller, p PolicySetParams) (*PolicySetResult, error) {
	return call[PolicySetResult](ctx, c, MethodPolicySet, p)
}

func (c *Client) Restart(ctx context.Context, _ Caller, p RestartParams) (*RestartResult, error) {
	return call[RestartResult](ctx, c, MethodRestart, p)
}

func (c *Client) Uninstall(ctx context.Context, _ Caller, p UninstallParams) (*UninstallResult, error) {
	return call[UninstallResult](ctx, c, MethodUninstall, p)
}

func (c *Client) Details(ctx context.Context, _ Caller, p DetailsParams) (*DetailsResult, error) {
	return call[DetailsResult](ctx, c, MethodDetails, p)
}

func call[R any](ctx context.Context, c *Client, method string, p any) (*R, error) {
	var r R
	if err := c.call(ctx, method, p, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// call posts one request and decodes its result into out.
func (c *Client) call(ctx context.Context, method string, params, out any) error {
	id := rpcwire.IntID(c.id.Add(1))
	body, err := rpcwire.Request(id, method, params)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("reaching the daemon at %s: %w", c.url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
	if err != nil {
		return fmt.Errorf("reading the daemon's answer to %s: %w", method, err)
	}
	if len(data) > MaxAnswerBytes {
		return fmt.Errorf("the daemon's answer to %s is larger than %d bytes", method, MaxAnswerBytes)
	}
	msg, err := readAnswer(data)
	if err != nil {
		return refusalError(resp.StatusCode, data, method, err)
	}
	if msg.Error != nil {
		return fromRPC(msg.Error)
	}
	if !bytes.Equal(msg.ID, rpcwire.EncodeID(id)) {
		return fmt.Errorf("the daemon answered %s with another request's id", method)
	}
	if err := json.Unmarshal(msg.Result, out); err != nil {
		return fmt.Errorf("decoding the daemon's answer to %s: %w", method, err)
	}
	return nil
}

// answer is one JSON-RPC response as the Client reads it.
type answer struct {
	ID     json.RawMessage
	Result json.RawMessage
	Error  *jsonrpc.Error
}

// readAnswer decodes one JSON-RPC response strictly (an answer with duplicate or
// case-variant members is as suspect as a request with them): jsonrpc "2.0", an id
// (null for a refusal), and exactly one of result and error.
func readAnswer(data []byte) (*answer, error) {
	v, err := rpcwire.DecodeValue(data)
	if err != nil {
		return nil, err
	}
	obj, ok := v.(map[string]any)
	if !ok || obj["jsonrpc"] != "2.0" {
		return nil, errors.New("not one JSON-RPC answer")
	}
	_, hasID := obj["id"]
	_, hasResult := obj["result"]
	_, hasError := obj["error"]
	if !hasID || hasResult == hasError || len(obj) != 3 {
		return nil, errors.New("not one JSON-RPC answer")
	}
	var a struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    *int64          `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("not one JSON-RPC answer: %w", err)
	}
	out := &answer{ID: a.ID, Result: a.Result}
	if hasError {
		if a.Error == nil || a.Error.Code == nil {
			return nil, errors.New("not one JSON-RPC answer: error without a code")
		}
		out.Error = &jsonrpc.Error{Code: *a.Error.Code, Message: a.Error.Message, Data: a.Error.Data}
	}
	return out, nil
}

// refusalError reads an answer that is not JSON-RPC: serve's guard refuses with
// {"error":"forbidden_host"} and the like before the protocol sees the request.
func refusalError(status int, data []byte, method string, cause error) error {
	var r struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(data, &r) == nil && r.Error != "" {
		return &Error{Code: r.Error, Message: fmt.Sprintf("the daemon refused %s: %s (HTTP %d)", method, r.Error, status)}
	}
	return fmt.Errorf("the daemon's answer to %s (HTTP %d) is not a JSON-RPC answer: %v", method, status, cause)
}

// Subscribe opens a WebSocket and calls fn with each notification the daemon pushes,
// from one goroutine, until stop is called or the socket ends (the daemon stopped, or
// dropped this socket for not reading: fn must return quickly).
func (c *Client) Subscribe(fn func(Notification)) (stop func(), err error) {
	ctx, cancel := context.WithCancel(context.Background())
	wsURL := "ws" + strings.TrimPrefix(c.url, "http")
	conn, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{
		HTTPClient: c.hc,
		HTTPHeader: http.Header{"Authorization": {"Bearer " + c.token}},
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("opening a management socket at %s: %w", wsURL, err)
	}
	conn.SetReadLimit(MaxAnswerBytes)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				return
			}
			if n, ok := DecodeNotification(data); ok {
				fn(n)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			_ = conn.Close(websocket.StatusNormalClosure, "")
			cancel()
			<-done
		})
	}, nil
}

// DecodeNotification reads one of the three notifications from a WebSocket message;
// false for anything else (an answer, an unknown method, params that do not decode).
func DecodeNotification(data []byte) (Notification, bool) {
	body, rpcErr := rpcwire.Limits{MaxBytes: MaxAnswerBytes}.Decode(data)
	if rpcErr != nil || body.Batch || body.Items[0].Msg == nil || !body.Items[0].Msg.IsNotification() {
		return nil, false
	}
	m := body.Items[0].Msg
	var n Notification
	switch m.Method {
	case NotifyChanged:
		n = &Changed{}
	case NotifyStatusChanged:
		n = &StatusChanged{}
	case NotifyCatalogChanged:
		n = &CatalogChanged{}
	default:
		return nil, false
	}
	if json.Unmarshal(m.Params, n) != nil {
		return nil, false
	}
	return n, true
}
