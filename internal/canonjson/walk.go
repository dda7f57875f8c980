package canonjson

import (
	"strconv"
	"strings"
)

// Path is where a value sits in a document, as JSON Pointer reference tokens
// (unescaped).
type Path []string

// String returns p as a JSON Pointer (RFC 6901): "" for the top, else "/a/0/b~1c".
func (p Path) String() string {
	if len(p) == 0 {
		return ""
	}
	var b strings.Builder
	for _, t := range p {
		b.WriteByte('/')
		b.WriteString(PointerToken(t))
	}
	return b.String()
}

// Walk calls fn for every string in v, in document order (members in canonical
// order): each member name, with isKey true and the path of that member, and each
// string value, with its path. The Path passed to fn is reused after fn returns: copy
// it (or call String) to keep it.
func Walk(v *Value, fn func(path Path, isKey bool, s string)) {
	walk(v, make(Path, 0, 16), fn)
}

func walk(v *Value, path Path, fn func(Path, bool, string)) {
	switch v.Kind {
	case String:
		fn(path, false, v.Text)
	case Array:
		for i := range v.Elems {
			walk(&v.Elems[i], append(path, strconv.Itoa(i)), fn)
		}
	case Object:
		for i := range v.Members {
			p := append(path, v.Members[i].Key)
			fn(p, true, v.Members[i].Key)
			walk(&v.Members[i].Value, p, fn)
		}
	}
}
