package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/internal/upstream"
)

// scenarios are the calls each scenario expects a client to make.
var scenarios = map[string]func(ctx context.Context, h harness, st setup) error{
	"initialize":                          listTools,
	"request-metadata":                    listTools,
	"json-schema-ref-no-deref":            listTools,
	"tools_call":                          toolsCall,
	"sep-2322-client-request-state":       requestState,
	"http-standard-headers":               standardHeaders,
	"http-custom-headers":                 customHeaders,
	"http-invalid-tool-headers":           invalidToolHeaders,
	"json-schema-2020-12-preservation":    schemaPreservation,
	"elicitation-sep1034-client-defaults": elicitationDefaults,
	"sse-retry":                           sseRetry,
}

func init() {
	for _, name := range []string{
		"auth/2025-03-26-oauth-metadata-backcompat", "auth/2025-03-26-oauth-endpoint-fallback",
		"auth/authorization-server-migration", "auth/basic-cimd",
		"auth/iss-normalized", "auth/iss-not-advertised", "auth/iss-supported", "auth/iss-supported-missing",
		"auth/iss-unexpected", "auth/iss-wrong-issuer",
		"auth/metadata-default", "auth/metadata-issuer-mismatch", "auth/metadata-var1", "auth/metadata-var2", "auth/metadata-var3",
		"auth/offline-access-not-supported", "auth/offline-access-scope", "auth/pre-registration", "auth/resource-mismatch",
		"auth/scope-from-scopes-supported", "auth/scope-from-www-authenticate", "auth/scope-omitted-when-undefined",
		"auth/scope-retry-limit", "auth/scope-step-up",
		"auth/token-endpoint-auth-basic", "auth/token-endpoint-auth-none", "auth/token-endpoint-auth-post",
		"auth/client-credentials-basic", "auth/client-credentials-jwt",
		"auth/enterprise-managed-authorization", "auth/dpop", "auth/dpop-nonce", "auth/wif-jwt-bearer",
	} {
		scenarios[name] = authorized
	}
}

// tool is the part of a listed tool a harness reads; the rest stays raw.
type tool struct {
	Name        string          `json:"name"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// tools lists every page of tools, leaving out those a stateless server's
// client must not call (invalid x-mcp-header annotations), as toolgate's
// catalogue does.
func tools(ctx context.Context, h harness) ([]tool, error) {
	var all []tool
	var cursor *string
	for page := 0; page < 100; page++ {
		params := json.RawMessage(nil)
		if cursor != nil {
			b, _ := json.Marshal(map[string]string{"cursor": *cursor})
			params = b
		}
		res, err := h.Call(ctx, "tools/list", params)
		if err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		var r struct {
			Tools      []tool  `json:"tools"`
			NextCursor *string `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &r); err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		for _, t := range r.Tools {
			if upstream.ValidateToolHeaders(t.InputSchema) == nil {
				all = append(all, t)
			}
		}
		if r.NextCursor == nil || *r.NextCursor == "" {
			return all, nil
		}
		cursor = r.NextCursor
	}
	return all, nil
}

func listTools(ctx context.Context, h harness, _ setup) error {
	_, err := tools(ctx, h)
	return err
}

// callTool is tools/call with the arguments as raw JSON, input requests
// answered as the harness would.
func callTool(ctx context.Context, h harness, name string, arguments json.RawMessage) (json.RawMessage, error) {
	n, _ := json.Marshal(name)
	if len(arguments) == 0 {
		arguments = json.RawMessage(`{}`)
	}
	return resolve(ctx, h, "tools/call", json.RawMessage(`{"name":`+string(n)+`,"arguments":`+string(arguments)+`}`))
}

func toolsCall(ctx context.Context, h harness, _ setup) error {
	if _, err := tools(ctx, h); err != nil {
		return err
	}
	_, err := callTool(ctx, h, "add_numbers", json.RawMessage(`{"a":5,"b":3}`))
	return err
}

func authorized(ctx context.Context, h harness, _ setup) error {
	if _, err := tools(ctx, h); err != nil {
		return err
	}
	_, err := callTool(ctx, h, "test-tool", nil)
	return err
}

func requestState(ctx context.Context, h harness, _ setup) error {
	for _, name := range []string{"test_mrtr_echo_state", "test_mrtr_no_state", "test_mrtr_unrelated", "test_mrtr_no_result_type"} {
		if _, err := callTool(ctx, h, name, nil); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// standardHeaders makes one request of each kind the scenario checks the
// Mcp-Method and Mcp-Name headers of.
func standardHeaders(ctx context.Context, h harness, _ setup) error {
	ts, err := tools(ctx, h)
	if err != nil {
		return err
	}
	if len(ts) > 0 {
		if _, err := callTool(ctx, h, ts[0].Name, nil); err != nil {
			return err
		}
	}
	res, err := h.Call(ctx, "resources/list", nil)
	if err != nil {
		return err
	}
	var rl struct {
		Resources []struct {
			URI string `json:"uri"`
		} `json:"resources"`
	}
	if json.Unmarshal(res, &rl) == nil && len(rl.Resources) > 0 {
		u, _ := json.Marshal(rl.Resources[0].URI)
		if _, err := resolve(ctx, h, "resources/read", json.RawMessage(`{"uri":`+string(u)+`}`)); err != nil {
			return err
		}
	}
	res, err = h.Call(ctx, "prompts/list", nil)
	if err != nil {
		return err
	}
	var pl struct {
		Prompts []struct {
			Name string `json:"name"`
		} `json:"prompts"`
	}
	if json.Unmarshal(res, &pl) == nil && len(pl.Prompts) > 0 {
		n, _ := json.Marshal(pl.Prompts[0].Name)
		if _, err := resolve(ctx, h, "prompts/get", json.RawMessage(`{"name":`+string(n)+`,"arguments":{}}`)); err != nil {
			return err
		}
	}
	return nil
}

// customHeaders makes the calls the scenario's context lists, arguments as
// the suite wrote them.
func customHeaders(ctx context.Context, h harness, st setup) error {
	if _, err := tools(ctx, h); err != nil {
		return err
	}
	raw, _ := json.Marshal(st.context["toolCalls"])
	var calls []struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(raw, &calls); err != nil {
		return fmt.Errorf("toolCalls: %w", err)
	}
	for _, c := range calls {
		if _, err := callTool(ctx, h, c.Name, c.Arguments); err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
	}
	return nil
}

// invalidToolHeaders calls every tool the catalogue kept.
func invalidToolHeaders(ctx context.Context, h harness, _ setup) error {
	ts, err := tools(ctx, h)
	if err != nil {
		return err
	}
	for _, t := range ts {
		if _, err := callTool(ctx, h, t.Name, json.RawMessage(`{"region":"us-west1"}`)); err != nil {
			return fmt.Errorf("%s: %w", t.Name, err)
		}
	}
	return nil
}

// schemaPreservation hands the focal tool's inputSchema back to the suite
// byte for byte: what toolgate listed is what the server wrote.
func schemaPreservation(ctx context.Context, h harness, _ setup) error {
	ts, err := tools(ctx, h)
	if err != nil {
		return err
	}
	for _, t := range ts {
		if t.Name == "json_schema_2020_12_tool" {
			_, err := callTool(ctx, h, "json_schema_echo", json.RawMessage(`{"schema":`+string(t.InputSchema)+`}`))
			return err
		}
	}
	return fmt.Errorf("tool json_schema_2020_12_tool not listed")
}

func elicitationDefaults(ctx context.Context, h harness, _ setup) error {
	if _, err := tools(ctx, h); err != nil {
		return err
	}
	_, err := callTool(ctx, h, "test_client_elicitation_defaults", nil)
	return err
}

func sseRetry(ctx context.Context, h harness, _ setup) error {
	if _, err := tools(ctx, h); err != nil {
		return err
	}
	_, err := callTool(ctx, h, "test_reconnection", nil)
	return err
}

// isInputRequired reports a stateless input_required result.
func isInputRequired(res json.RawMessage) bool {
	var r struct {
		ResultType string `json:"resultType"`
	}
	return json.Unmarshal(res, &r) == nil && strings.EqualFold(r.ResultType, "input_required")
}
