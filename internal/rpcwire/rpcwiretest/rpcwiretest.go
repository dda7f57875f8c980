// Package rpcwiretest builds JSON-RPC payloads for tests and benchmarks of
// what a large request costs, at every layer that reads one.
package rpcwiretest

import (
	"fmt"
	"strings"
)

// Shapes of LargeCall's arguments: the two extremes of what a large body costs
// to read.
var Shapes = []string{ShapeString, ShapeTree}

const (
	// ShapeString is one long string (a file written whole).
	ShapeString = "string"
	// ShapeTree is many small objects (a structured payload).
	ShapeTree = "tree"
)

// LargeCall is a tools/call of tool, of about size bytes, whose arguments have
// the given shape: {"path","content"} for ShapeString, {"rows":[…]} for
// ShapeTree.
func LargeCall(tool, shape string, size int) []byte {
	var sb strings.Builder
	sb.Grow(size + 64)
	fmt.Fprintf(&sb, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":`, tool)
	switch shape {
	case ShapeString:
		sb.WriteString(`{"path":"big.txt","content":"`)
		for sb.Len() < size-8 {
			sb.WriteString("lorem ipsum dolor sit amet \\n ")
		}
		sb.WriteString(`"}`)
	case ShapeTree:
		sb.WriteString(`{"rows":[`)
		for i := 0; sb.Len() < size-8; i++ {
			if i > 0 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, `{"id":%d,"name":"row-%d","ok":true}`, i, i)
		}
		sb.WriteString(`]}`)
	default:
		panic("rpcwiretest: unknown shape " + shape)
	}
	sb.WriteString(`}}`)
	return []byte(sb.String())
}
