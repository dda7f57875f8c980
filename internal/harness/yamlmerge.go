package harness

import (
	"bytes"
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// YAML files are merged through yaml.Node, which keeps head, line and foot comments and
// the order of every other key; yaml.v3 re-indents what it writes, so the layout of the
// rest of the file can change in whitespace, never in content (undo restores the bytes).

func parseYAMLDoc(content []byte) (*yaml.Node, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(content))
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, errors.New("invalid YAML: the file holds more than one document")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, errors.New("invalid YAML: expected one document")
	}
	return &doc, nil
}

func encodeYAML(doc *yaml.Node) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	return buf.Bytes(), nil
}

func toNode(v any) (*yaml.Node, error) {
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	return &n, nil
}

// mapGet returns the value node for key in a mapping node.
func mapGet(m *yaml.Node, key string) (*yaml.Node, int) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1], i + 1
		}
	}
	return nil, -1
}

// mergeYAMLMap sets root mapping's path (keys) to v, creating mappings as needed.
func mergeYAMLMap(content []byte, path []string, v any) ([]byte, error) {
	doc, err := parseYAMLDoc(content)
	if err != nil {
		return nil, err
	}
	cur := doc.Content[0]
	if cur.Kind != yaml.MappingNode {
		return nil, errors.New("invalid YAML: the top level must be a mapping")
	}
	val, err := toNode(v)
	if err != nil {
		return nil, err
	}
	for i, key := range path {
		child, idx := mapGet(cur, key)
		last := i == len(path)-1
		if child == nil {
			var add *yaml.Node = val
			if !last {
				add = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			}
			cur.Content = append(cur.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, add)
			if last {
				break
			}
			cur = add
			continue
		}
		if last {
			// Keep the comments attached to the old value.
			val.HeadComment, val.LineComment, val.FootComment = child.HeadComment, child.LineComment, child.FootComment
			cur.Content[idx] = val
			break
		}
		if child.Kind == yaml.ScalarNode && child.Tag == "!!null" {
			child.Kind, child.Tag, child.Value = yaml.MappingNode, "!!map", ""
		}
		if child.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%q is not a mapping; toolgate will not replace it", key)
		}
		cur = child
	}
	return encodeYAML(doc)
}

// yamlLookup decodes the node at path of a YAML mapping document.
func yamlLookup(content []byte, path []string) (map[string]any, error) {
	doc, err := parseYAMLDoc(content)
	if err != nil {
		return nil, err
	}
	cur := doc.Content[0]
	for _, key := range path {
		if cur.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%q is not inside a mapping", key)
		}
		next, _ := mapGet(cur, key)
		if next == nil {
			return nil, fmt.Errorf("no %q entry in the file", key)
		}
		cur = next
	}
	var out map[string]any
	if err := cur.Decode(&out); err != nil {
		return nil, fmt.Errorf("reading the entry: %w", err)
	}
	return out, nil
}
