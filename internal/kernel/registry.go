package kernel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/policy"
)

// MaxCatalog is the most tools one turn's catalogue may hold (docs/kernel.md). Opening a turn
// whose effective catalogue is larger fails with ErrCatalogTooLarge; nothing is cut.
const MaxCatalog = 512

// ErrCatalogTooLarge is returned by OpenTurn when more than MaxCatalog tools would be
// published.
var ErrCatalogTooLarge = errors.New("catalogue too large")

// ErrInvalidTool is wrapped by every Register failure.
var ErrInvalidTool = errors.New("invalid tool")

// entry is a registered tool with everything the per-call path needs precomputed: the
// compiled input schema (never compiled again) and the published object minus its name.
type entry struct {
	tool   *Tool
	ns     string
	schema *jsonschema.Schema
	// rest is the published tool object's members after "name", in published order,
	// without the surrounding braces: `"description":…,"inputSchema":…,…`.
	rest []byte
	// canon is the canonical (sorted-key) encoding of the same members, for catalogHash.
	canon []byte
}

// denyLoader refuses every external $ref: a tool schema must never make toolgate read a
// file or fetch a URL. The draft meta-schemas are built into the validator and do not
// go through the loader.
type denyLoader struct{}

func (denyLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema reference %q refused", url)
}

func compileEntry(t *Tool) (*entry, error) {
	e, _, err := compileTool(t)
	return e, err
}

// compileTool validates t and builds its entry: from its fields, or from its Raw
// object (raw.go), which may come with a diagnostic.
func compileTool(t *Tool) (*entry, *Diagnostic, error) {
	if !policy.ValidToolID(t.ID) {
		return nil, nil, fmt.Errorf("%w %q: id is not a canonical namespace.name", ErrInvalidTool, t.ID)
	}
	if t.Run == nil {
		return nil, nil, fmt.Errorf("%w %q: no Run function", ErrInvalidTool, t.ID)
	}
	if len(t.Raw) > 0 {
		return compileRawEntry(t)
	}
	e, err := compileFields(t)
	return e, nil, err
}

func compileFields(t *Tool) (*entry, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", ErrInvalidTool, t.ID, fmt.Sprintf(format, args...))
	}
	in := t.InputSchema
	if len(bytes.TrimSpace(in)) == 0 {
		in = json.RawMessage(`{"type":"object"}`)
	}
	sch, err := compileSchema(in)
	if err != nil {
		return nil, bad("%v", err)
	}
	var out json.RawMessage
	if len(bytes.TrimSpace(t.OutputSchema)) > 0 {
		var o map[string]any
		if err := json.Unmarshal(t.OutputSchema, &o); err != nil || o == nil {
			return nil, bad("outputSchema is not a JSON object")
		}
		out, err = compact(t.OutputSchema)
		if err != nil {
			return nil, bad("outputSchema: %v", err)
		}
	}
	inC, err := compact(in)
	if err != nil {
		return nil, bad("inputSchema: %v", err)
	}
	e := &entry{tool: t, ns: t.Namespace(), schema: sch}
	src := t.Source
	if src == "" {
		src = "toolgate"
	}
	pub := publishedRest{
		Description:  t.Description,
		InputSchema:  inC,
		OutputSchema: out,
		Annotations:  publishAnnotations(t.Annotations),
		Meta:         publishedMeta{Namespace: e.ns, Source: src},
	}
	b, err := json.Marshal(pub)
	if err != nil {
		return nil, bad("encoding: %v", err)
	}
	e.rest = b[1 : len(b)-1]
	e.canon, err = canonicalJSON(b)
	if err != nil {
		return nil, bad("canonical encoding: %v", err)
	}
	return e, nil
}

func compact(b []byte) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// canonicalJSON re-encodes a JSON value with object members sorted by key and numbers
// kept as written, so semantically equal tool objects hash the same.
func canonicalJSON(b []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// publishedRest is a published MCP Tool object without its name, in the field order
// tools/list has always served (docs/http-contract.md, "Methods"). Nothing else of the
// kernel's (grants, handler, access rules) is here.
type publishedRest struct {
	Description  string                  `json:"description,omitempty"`
	InputSchema  json.RawMessage         `json:"inputSchema"`
	OutputSchema json.RawMessage         `json:"outputSchema,omitempty"`
	Annotations  mcpspec.ToolAnnotations `json:"annotations"`
	Meta         publishedMeta           `json:"_meta"`
}

type publishedMeta struct {
	Namespace string `json:"toolgate/namespace"` // mcpspec.MetaNamespace
	Source    string `json:"toolgate/source"`    // mcpspec.MetaSource
}

// publishAnnotations maps the kernel's hints to MCP's. MCP gives destructiveHint and
// idempotentHint meaning only when readOnlyHint is false, so a read-only tool publishes
// readOnlyHint alone; others state both explicitly,
// because an omitted destructiveHint means "destructive" to a client.
func publishAnnotations(a Annotations) mcpspec.ToolAnnotations {
	ro := a.ReadOnly
	p := mcpspec.ToolAnnotations{ReadOnlyHint: &ro, OpenWorldHint: a.OpenWorld}
	if !a.ReadOnly {
		d, i := a.Destructive, a.Idempotent
		p.DestructiveHint, p.IdempotentHint = &d, &i
	}
	return p
}

// namespaceOf returns the namespace part of a canonical id.
func namespaceOf(id string) string {
	ns, _, _ := strings.Cut(id, ".")
	return ns
}
