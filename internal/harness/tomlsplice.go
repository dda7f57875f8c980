package harness

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// The TOML merge splices toolgate's [mcp_servers.<name>] table (and its subtables) into a
// config.toml as text, because no Go TOML library keeps comments on a round trip. The
// block itself is produced by go-toml; the splice result is parsed again and compared
// with the original, so a splice that would touch anything but toolgate's table is
// refused rather than written.

// tomlBlock encodes one [mcp_servers.<name>] table.
func tomlBlock(name string, entry map[string]any) ([]byte, error) {
	b, err := toml.Marshal(map[string]any{"mcp_servers": map[string]any{name: entry}})
	if err != nil {
		return nil, fmt.Errorf("encoding TOML: %w", err)
	}
	// go-toml writes the empty parent table first; the parent is implied by the child.
	b = bytes.TrimPrefix(b, []byte("[mcp_servers]\n"))
	return b, nil
}

// tomlHeaderPath returns the key path of a table header line ("[a.'b c'.d]"), whether it
// is an array-of-tables header, and ok=false for lines that are not headers.
func tomlHeaderPath(line string) (path []string, array bool, ok bool) {
	t := strings.TrimSpace(line)
	if !strings.HasPrefix(t, "[") {
		return nil, false, false
	}
	array = strings.HasPrefix(t, "[[")
	// Let the real parser read the header: an empty table at that path.
	var m map[string]any
	if err := toml.Unmarshal([]byte(t+"\n"), &m); err != nil {
		return nil, false, false
	}
	var cur any = m
	for {
		switch v := cur.(type) {
		case map[string]any:
			if len(v) != 1 {
				return path, array, true
			}
			for k, next := range v {
				path = append(path, k)
				cur = next
			}
		case []any:
			if len(v) != 1 {
				return path, array, true
			}
			cur = v[0]
		default:
			return path, array, true
		}
	}
}

// tomlLines splits content into lines (keeping "\n") and marks which lines start inside
// a multi-line string, where a "[" is text, not a header.
func tomlLines(content []byte) (lines []string, inString []bool) {
	s := string(content)
	open := ""
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		line := s
		if i >= 0 {
			line = s[:i+1]
		}
		s = s[len(line):]
		lines = append(lines, line)
		inString = append(inString, open != "")
		// Track """ and ''' delimiters (good enough for the header scan; the result is
		// re-parsed and compared, so a mistake can only refuse, never corrupt).
		rest := line
		for {
			if open != "" {
				j := strings.Index(rest, open)
				if j < 0 {
					break
				}
				rest = rest[j+3:]
				open = ""
				continue
			}
			if k := strings.IndexByte(rest, '#'); k >= 0 && !strings.Contains(rest[:k], `"`) && !strings.Contains(rest[:k], "'") {
				rest = rest[:k]
			}
			d, q := strings.Index(rest, `"""`), strings.Index(rest, `'''`)
			if d < 0 && q < 0 {
				break
			}
			if d < 0 || (q >= 0 && q < d) {
				open, rest = `'''`, rest[q+3:]
			} else {
				open, rest = `"""`, rest[d+3:]
			}
		}
	}
	return lines, inString
}

func hasPrefixPath(path, prefix []string) bool {
	if len(path) < len(prefix) {
		return false
	}
	for i := range prefix {
		if path[i] != prefix[i] {
			return false
		}
	}
	return true
}

func parseTOMLMap(b []byte) (map[string]any, error) {
	var m map[string]any
	if err := toml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("invalid TOML: %w", err)
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// withoutServer returns a deep-enough copy of m without mcp_servers.<name>.
func withoutServer(m map[string]any, name string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	if ms, ok := out["mcp_servers"].(map[string]any); ok {
		cp := make(map[string]any, len(ms))
		for k, v := range ms {
			if k != name {
				cp[k] = v
			}
		}
		out["mcp_servers"] = cp
		if len(cp) == 0 {
			delete(out, "mcp_servers")
		}
	}
	return out
}

// mergeTOML replaces or appends the [mcp_servers.<name>] table in content.
func mergeTOML(content []byte, name string, entry map[string]any) ([]byte, error) {
	before, err := parseTOMLMap(content)
	if err != nil {
		return nil, err
	}
	block, err := tomlBlock(name, entry)
	if err != nil {
		return nil, err
	}
	want := []string{"mcp_servers", name}
	lines, inStr := tomlLines(content)
	var out, dropped []string
	inserted, inBlock, sawBlock := false, false, false
	// keepTrailing re-emits the comments and blank lines that end a replaced block:
	// they introduce whatever table follows, not toolgate's.
	keepTrailing := func() {
		j := len(dropped)
		for j > 0 {
			t := strings.TrimSpace(dropped[j-1])
			if t != "" && !strings.HasPrefix(t, "#") {
				break
			}
			j--
		}
		out = append(out, dropped[j:]...)
		dropped = nil
	}
	for i, line := range lines {
		if !inStr[i] {
			if path, _, ok := tomlHeaderPath(line); ok {
				was := inBlock
				inBlock = hasPrefixPath(path, want)
				if inBlock {
					sawBlock = true
				} else if was {
					keepTrailing()
				}
			}
		}
		if inBlock {
			if !inserted {
				out = append(out, string(block))
				inserted = true
			}
			dropped = append(dropped, line)
			continue
		}
		out = append(out, line)
	}
	if inBlock {
		keepTrailing()
	}
	if ms, ok := before["mcp_servers"].(map[string]any); ok && ms[name] != nil && !sawBlock {
		return nil, fmt.Errorf("mcp_servers.%s is defined with dotted keys or an inline table; toolgate only replaces a [mcp_servers.%s] table, so edit it by hand or remove it first", name, name)
	}
	if !inserted {
		if len(out) > 0 && !strings.HasSuffix(out[len(out)-1], "\n") {
			out[len(out)-1] += "\n"
		}
		if len(out) > 0 && strings.TrimSpace(out[len(out)-1]) != "" {
			out = append(out, "\n")
		}
		out = append(out, string(block))
	} else {
		// Keep a blank line between our block and whatever follows it.
		for i, l := range out {
			if l == string(block) && i+1 < len(out) && strings.TrimSpace(out[i+1]) != "" {
				out[i] = l + "\n"
			}
		}
	}
	result := []byte(strings.Join(out, ""))
	after, err := parseTOMLMap(result)
	if err != nil {
		return nil, fmt.Errorf("merging into config.toml would produce invalid TOML (%v); edit it by hand", err)
	}
	if !reflect.DeepEqual(withoutServer(before, name), withoutServer(after, name)) {
		return nil, fmt.Errorf("merging [mcp_servers.%s] would change other settings in this file; edit it by hand", name)
	}
	return result, nil
}

// tomlEntry reads mcp_servers.<name> from a config.toml.
func tomlEntry(content []byte, name string) (map[string]any, error) {
	m, err := parseTOMLMap(content)
	if err != nil {
		return nil, err
	}
	ms, ok := m["mcp_servers"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("no [mcp_servers] table in the file")
	}
	e, ok := ms[name].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("no [mcp_servers.%s] table in the file", name)
	}
	return e, nil
}

// tomlBlockValue renders v as a TOML inline value.
func tomlBlockValue(v any) (string, error) {
	b, err := toml.Marshal(map[string]any{"v": v})
	if err != nil {
		return "", fmt.Errorf("encoding TOML: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if !strings.HasPrefix(s, "v = ") {
		return "", fmt.Errorf("encoding TOML: unexpected form %q", s)
	}
	return strings.TrimPrefix(s, "v = "), nil
}
