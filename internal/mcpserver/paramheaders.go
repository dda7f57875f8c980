package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/rpcwire"
)

// A 2026-07-28 tools/call over HTTP mirrors each argument whose inputSchema
// property is annotated "x-mcp-header": "Name" in the header Mcp-Param-Name
// (mcpspec.ParseParamHeaders), so an intermediary can route on it. The server
// checks the mirror as it checks Mcp-Name: an argument present without its
// header, a header that disagrees with the argument, or a =?base64?…?= value
// that is not valid base64 is 400 with -32020, before anything runs.

// paramTable is a conn's tools' header bindings, read once from its turn's
// catalogue (which never changes) at its first tools/call: only tools whose JSON
// mentions x-mcp-header are parsed.
type paramTable struct {
	once  sync.Once
	tools map[string]mcpspec.ParamHeaders
}

func (c *conn) paramHeaders(ctx context.Context, name string) (mcpspec.ParamHeaders, bool) {
	c.params.once.Do(func() {
		list, err := c.turn.ListTools(ctx)
		if err != nil || list == nil {
			return
		}
		for _, t := range list.Tools {
			if !bytes.Contains(t, []byte("x-mcp-header")) {
				continue
			}
			var tool struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			}
			if json.Unmarshal(t, &tool) != nil {
				continue
			}
			if c.params.tools == nil {
				c.params.tools = map[string]mcpspec.ParamHeaders{}
			}
			c.params.tools[tool.Name] = mcpspec.ParseParamHeaders(tool.InputSchema)
		}
	})
	th, ok := c.params.tools[name]
	return th, ok
}

// checkParamHeaders checks the Mcp-Param-* headers of a 2026-07-28 tools/call.
func (c *conn) checkParamHeaders(ctx context.Context, r *http.Request, m *rpcwire.Message) *jsonrpc.Error {
	if m.Method != mcpspec.MethodToolsCall {
		return nil
	}
	var name string
	if json.Unmarshal(m.Param("name"), &name) != nil {
		return nil // callTool refuses it
	}
	th, ok := c.paramHeaders(ctx, name)
	if !ok || th.Err != nil {
		return nil
	}
	mismatch := func(h string) *jsonrpc.Error {
		return &jsonrpc.Error{Code: mcpspec.CodeHeaderMismatch, Message: "header mismatch: Mcp-Param-" + h + " must equal its argument"}
	}
	want := th.Values(m.Param("arguments"))
	for _, b := range th.Bindings {
		key := "Mcp-Param-" + b.Header
		sent := r.Header.Values(key)
		v, present := want[b.Header]
		switch {
		case len(sent) > 1:
			return mismatch(b.Header)
		case !present:
			continue // nothing to mirror (absent, null, or not a primitive: the schema decides)
		case len(sent) == 0:
			return mismatch(b.Header)
		}
		got, ok := mcpspec.DecodeHeaderValue(strings.TrimSpace(sent[0]))
		wantPlain, _ := mcpspec.DecodeHeaderValue(v)
		if !ok || got != wantPlain {
			return mismatch(b.Header)
		}
	}
	return nil
}
