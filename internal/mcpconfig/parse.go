package mcpconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/rpcwire"
)

// Limits. Each is far above what a real config needs and keeps a hostile one from
// costing more than a bounded amount of memory and time (docs/mcp-config.md).
const (
	MaxConfigBytes      = 1 << 20  // the whole document
	MaxServers          = 256      // entries in one document
	MaxKeyBytes         = 256      // an entry's key as written
	MaxPathBytes        = 4096     // command, cwd
	MaxArgs             = 1024     // arguments of one server
	MaxArgBytes         = 32 << 10 // one argument
	MaxEnv              = 256      // env variables of one server
	MaxEnvNameBytes     = 128      // one env variable's name
	MaxEnvValueBytes    = 32 << 10 // one env value
	MaxHeaders          = 64       // headers of one server
	MaxHeaderNameBytes  = 128      // one header's name
	MaxHeaderValueBytes = 8 << 10  // one header value
	MaxURLBytes         = 8 << 10  // url
	MaxDescriptionBytes = 1024     // description
	MaxDiagnostics      = 32       // diagnostics kept per entry; the rest are counted
)

// Options adjusts Parse. The zero value resolves no references and no relative paths.
type Options struct {
	// LookupEnv resolves ${env:NAME}, ${NAME} and ${NAME:-default} references, once,
	// at install time; the resolved value becomes a secret. The installer passes the
	// environment of the person installing (the CLI's), never the daemon's. nil
	// refuses every reference. Names starting with TOOLGATE_ are refused whatever it
	// returns: they are toolgate's own.
	LookupEnv func(name string) (string, bool)
	// BaseDir is the directory of the config file when installing from a file. A
	// relative cwd, or a relative command path such as "./server.js" without a cwd,
	// is resolved against it; "" refuses them.
	BaseDir string
}

// containers are the members a document keeps its servers in, by shape.
var containers = []string{"mcpServers", "servers", "mcp.servers"}

// Parse reads one config document. It never fails as a whole with an error value:
// everything wrong is a Diagnostic, at document level or on the entry concerned, so
// one bad entry never hides the others. h gives the keyed digests the fingerprint is
// computed over; opts may be nil.
func Parse(data []byte, h Hasher, opts *Options) *Result {
	if h == nil {
		panic("mcpconfig.Parse: nil Hasher") // a caller's bug: fingerprints need the keystore's digest
	}
	if opts == nil {
		opts = &Options{}
	}
	if opts.BaseDir != "" && !filepath.IsAbs(opts.BaseDir) {
		if abs, err := filepath.Abs(opts.BaseDir); err == nil {
			o := *opts
			o.BaseDir = abs
			opts = &o
		}
	}
	r := &Result{}
	docErr := func(path, format string, args ...any) *Result {
		r.Diagnostics = append(r.Diagnostics, Diagnostic{Path: path, Severity: Error, Message: fmt.Sprintf(format, args...)})
		return r
	}
	if len(data) > MaxConfigBytes {
		return docErr("", "the config is %d bytes, at most %d", len(data), MaxConfigBytes)
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a byte order mark some editors write
	if !utf8.Valid(data) {
		return docErr("", "the config is not valid UTF-8")
	}
	if msg := syntaxError(data); msg != "" {
		return docErr("", "%s", msg)
	}
	top, err := members(data)
	if err != nil {
		return docErr("", "the config must be a JSON object")
	}
	var found []int
	var mcpInner []objMember
	for i, m := range top {
		switch m.key {
		case "mcpServers", "servers":
			found = append(found, i)
		case "mcp":
			// VS Code's settings.json keeps them in "mcp": {"servers": …}.
			if inner, err := members(m.raw); err == nil && hasMember(inner, "servers") {
				found = append(found, i)
				mcpInner = inner
			}
		}
	}
	// Top-level and container members are checked strictly here; each entry is checked
	// on its own below, so a duplicate inside one entry fails that entry only. Other
	// top-level members (an editor's other settings) are not read, so not judged.
	if err := strictSkeleton(top, found, mcpInner); err != nil {
		return docErr("", "%s", err)
	}
	switch len(found) {
	case 0:
		return docErr("", "no servers: the config needs an object named mcpServers (Claude, Cursor, Windsurf, Gemini CLI), servers (VS Code mcp.json) or mcp.servers (VS Code settings.json)")
	case 1:
	default:
		var names []string
		for _, i := range found {
			n := top[i].key
			if n == "mcp" {
				n = "mcp.servers"
			}
			names = append(names, n)
		}
		return docErr("", "servers are given in both %s: keep one", strings.Join(names, " and "))
	}
	c := top[found[0]]
	r.Container = c.key
	if c.key == "mcp" {
		r.Container = "mcp.servers"
		for _, im := range mcpInner {
			if im.key == "servers" {
				c = im
				break
			}
		}
	}
	path := r.Container
	if bytes.Equal(bytes.TrimSpace(c.raw), []byte("null")) {
		return docErr(path, "must be an object of servers by name, not null")
	}
	entries, err := members(c.raw)
	if err != nil {
		return docErr(path, "must be an object of servers by name")
	}
	switch {
	case len(entries) == 0:
		return docErr(path, "holds no servers")
	case len(entries) > MaxServers:
		return docErr(path, "holds %d servers, at most %d", len(entries), MaxServers)
	}
	for _, e := range entries {
		r.Entries = append(r.Entries, parseEntry(path, e.key, e.raw, h, opts))
	}
	checkCollisions(r.Entries, path)
	return r
}

// objMember is one object member: its key and its value's bytes.
type objMember struct {
	key string
	raw json.RawMessage
}

// members lists an object's members in document order, duplicates included. The
// bytes are known to be valid JSON.
func members(raw []byte) ([]objMember, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not an object")
	}
	var out []objMember
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := kt.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, objMember{key: key, raw: v})
	}
	return out, nil
}

func hasMember(ms []objMember, key string) bool {
	for _, m := range ms {
		if m.key == key {
			return true
		}
	}
	return false
}

// strictSkeleton checks the top level and the container for duplicate and case-variant
// member names with the same strict decoder as JSON-RPC messages (rpcwire), run over a
// skeleton of the document: the same member names, in order, with null values.
func strictSkeleton(top []objMember, found []int, mcpInner []objMember) error {
	var b bytes.Buffer
	obj := func(ms []objMember, expand func(i int, m objMember) bool) {
		b.WriteByte('{')
		for i, m := range ms {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(m.key)
			b.Write(k)
			b.WriteByte(':')
			if !expand(i, m) {
				b.WriteString("null")
			}
		}
		b.WriteByte('}')
	}
	entriesOf := func(raw []byte) bool {
		inner, err := members(raw)
		if err != nil {
			return false
		}
		obj(inner, func(int, objMember) bool { return false })
		return true
	}
	isFound := map[int]bool{}
	for _, i := range found {
		isFound[i] = true
	}
	obj(top, func(i int, m objMember) bool {
		if !isFound[i] {
			return false
		}
		if m.key != "mcp" {
			return entriesOf(m.raw)
		}
		obj(mcpInner, func(_ int, im objMember) bool {
			if im.key == "servers" {
				return entriesOf(im.raw)
			}
			return false
		})
		return true
	})
	if _, err := rpcwire.DecodeValue(b.Bytes()); err != nil {
		return err
	}
	return nil
}

// syntaxError returns "" for valid JSON, else a message with the line and column.
// encoding/json's message names at most one character of the input.
func syntaxError(data []byte) string {
	if json.Valid(data) {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var v any
	err := dec.Decode(&v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			return "not JSON: data after the end of the config object"
		}
		return "not JSON"
	}
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return "not JSON: the config ends early"
		}
		return "not JSON"
	}
	off := int(se.Offset)
	if off > len(data) {
		off = len(data)
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := off - bytes.LastIndexByte(data[:off], '\n')
	msg := fmt.Sprintf("not JSON: line %d, column %d: %s", line, col, se.Error())
	if i := off - 1; i >= 0 && i < len(data) && data[i] == '/' {
		msg += " (comments are not JSON: remove them)"
	}
	return msg
}
