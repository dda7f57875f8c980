package kernel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/internal/rpcwire"
)

// Diagnostic is something a registration noticed about one tool without refusing it
// (an input schema it could not compile, a _meta it dropped).
type Diagnostic struct {
	Tool    string `json:"tool"`
	Message string `json:"message"`
}

// maxRawTool bounds one raw tool object (a tools/list item is rarely over a few KiB;
// the host bounds a whole catalogue at 8 MiB).
const maxRawTool = 1 << 20

// rawMember is one member of a JSON object: its name and the exact bytes of its name
// and value as written.
type rawMember struct {
	name       string
	key, value []byte
}

// rawMembers splits obj, one JSON object, into its members, keeping the bytes of each.
// obj has been read strictly before (no duplicate or case-variant names).
func rawMembers(obj []byte) ([]rawMember, error) {
	d := json.NewDecoder(bytes.NewReader(obj))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	var out []rawMember
	for d.More() {
		ks := d.InputOffset()
		t, err := d.Token()
		if err != nil {
			return nil, err
		}
		name, _ := t.(string)
		ke := d.InputOffset()
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return nil, err
		}
		ve := d.InputOffset()
		// The decoder's offset before a key may sit on the ',' or white space before it.
		key := bytes.TrimLeft(obj[ks:ke], ", \t\r\n")
		out = append(out, rawMember{name: name, key: key, value: obj[ve-int64(len(v)) : ve]})
	}
	return out, nil
}

// objectOnly is the schema of a raw tool whose own cannot be compiled: calls are
// checked only for being an object (they always are by then), so the upstream decides.
var objectOnly = sync.OnceValue(func() *jsonschema.Schema {
	c := jsonschema.NewCompiler()
	c.UseLoader(denyLoader{})
	if err := c.AddResource("toolgate:///object.json", map[string]any{"type": "object"}); err != nil {
		panic(err)
	}
	return c.MustCompile("toolgate:///object.json")
})

// compileRawEntry builds the entry of a tool given as another server's raw object: the
// published members are the raw ones minus "name", with _meta spliced; the schema is
// compiled from the raw inputSchema, or, when that fails, objectOnly with a diagnostic.
func compileRawEntry(t *Tool) (*entry, *Diagnostic, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", ErrInvalidTool, t.ID, fmt.Sprintf(format, args...))
	}
	raw := bytes.TrimSpace(t.Raw)
	if len(raw) > maxRawTool {
		return nil, nil, bad("the tool object is %d bytes, at most %d", len(raw), maxRawTool)
	}
	// Strictly first: a duplicate or case-variant member could be read one way by the
	// validator and another by a client.
	if _, err := (rpcwire.Limits{MaxBytes: len(raw), MaxDepth: rpcwire.MaxDepth}).Canonical(raw); err != nil {
		return nil, nil, bad("the tool object: %v", err)
	}
	ms, err := rawMembers(raw)
	if err != nil {
		return nil, nil, bad("the tool object: %v", err)
	}
	e := &entry{tool: t, ns: t.Namespace()}
	src := t.Source
	if src == "" {
		src = e.ns
	}
	ours, _ := json.Marshal(publishedMeta{Namespace: e.ns, Source: src})
	var diag *Diagnostic
	note := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if diag == nil {
			diag = &Diagnostic{Tool: t.ID, Message: msg}
		} else {
			diag.Message += "; " + msg
		}
	}
	var rest bytes.Buffer
	var schema []byte
	hasMeta := false
	sep := func() {
		if rest.Len() > 0 {
			rest.WriteByte(',')
		}
	}
	for _, m := range ms {
		switch m.name {
		case "name":
			continue
		case "_meta":
			hasMeta = true
			sep()
			rest.Write(m.key)
			rest.WriteByte(':')
			rest.Write(spliceMeta(ours, m.value, note))
			continue
		case "inputSchema":
			schema = m.value
		}
		sep()
		rest.Write(m.key)
		rest.WriteByte(':')
		rest.Write(m.value)
	}
	if schema == nil {
		note("it has no inputSchema: published with {\"type\":\"object\"}")
		schema = []byte(`{"type":"object"}`)
		sep()
		rest.WriteString(`"inputSchema":{"type":"object"}`)
	}
	if !hasMeta {
		sep()
		rest.WriteString(`"_meta":`)
		rest.Write(ours)
	}
	if e.schema, err = compileSchema(schema); err != nil {
		note("its inputSchema cannot be compiled (%s): calls are checked only for being an object", clip(err.Error(), 300))
		e.schema = objectOnly()
	}
	e.rest = rest.Bytes()
	wrapped := make([]byte, 0, len(e.rest)+2)
	wrapped = append(append(append(wrapped, '{'), e.rest...), '}')
	if e.canon, err = canonicalJSON(wrapped); err != nil {
		return nil, nil, bad("canonical encoding: %v", err)
	}
	return e, diag, nil
}

// spliceMeta puts toolgate's _meta members (ours, an encoded object) at the front of
// the upstream's _meta object, dropping any member of the upstream's that claims a
// toolgate/ key; the upstream's other members keep their bytes. A _meta that is not an
// object is replaced by ours.
func spliceMeta(ours, theirs []byte, note func(string, ...any)) []byte {
	ms, err := rawMembers(theirs)
	if err != nil {
		note("its _meta is not an object: replaced")
		return ours
	}
	out := bytes.NewBuffer(make([]byte, 0, len(ours)+len(theirs)))
	out.Write(ours[:len(ours)-1])
	for _, m := range ms {
		if strings.HasPrefix(m.name, "toolgate/") {
			note("its _meta member %q is toolgate's own: dropped", clip(m.name, 64))
			continue
		}
		out.WriteByte(',')
		out.Write(m.key)
		out.WriteByte(':')
		out.Write(m.value)
	}
	out.WriteByte('}')
	return out.Bytes()
}

// compileSchema compiles one input schema with the deny-all loader; its root must be an
// object schema.
func compileSchema(in []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(in))
	if err != nil {
		return nil, fmt.Errorf("inputSchema is not JSON: %v", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("inputSchema is not a JSON object")
	}
	if typ, ok := obj["type"]; !ok || typ != "object" {
		return nil, fmt.Errorf(`inputSchema's root must declare "type": "object"`)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(denyLoader{})
	c.DefaultDraft(jsonschema.Draft2020)
	const loc = "toolgate:///input-schema.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("inputSchema: %v", err)
	}
	sch, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("compiling inputSchema: %v", err)
	}
	return sch, nil
}
