package mcpconfig

import (
	"errors"
	"fmt"
	"strings"
)

// reservedNames are namespaces of toolgate's own tools (local.*, server.*,
// toolgate.*); a server normalised to one of them is refused rather than renamed, so
// its tools can never be mistaken for built-ins.
var reservedNames = map[string]bool{"local": true, "server": true, "toolgate": true}

// NormalizeName turns a config key into a server name, the namespace of the server's
// tool ids (policy.ValidNamespace: 1–64 of [a-z0-9_-], starting with a letter or
// digit): ASCII letters are lower-cased, letters, digits, '_' and '-' kept, every run
// of other characters (spaces, dots, slashes, '@', non-ASCII) becomes one '-', and
// leading '-'/'_' and trailing '-' are trimmed; the result is cut to 64 bytes. So
// "GitHub" is "github", "my server" "my-server", "@scope/pkg" "scope-pkg". A key with
// no letter or digit, or one that names a built-in namespace, is an error.
func NormalizeName(key string) (string, error) {
	var b strings.Builder
	dash := false
	for _, r := range key {
		switch {
		case r >= 'A' && r <= 'Z':
			r += 'a' - 'A'
			fallthrough
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
			dash = false
		default: // '-' and everything else
			if !dash {
				b.WriteByte('-')
				dash = true
			}
		}
	}
	n := strings.TrimLeft(b.String(), "-_")
	if len(n) > 64 {
		n = n[:64]
	}
	n = strings.TrimRight(n, "-")
	if n == "" {
		return "", errors.New("has no letter or digit to make a server name of")
	}
	if reservedNames[n] {
		return "", fmt.Errorf("is the server name %q, which belongs to toolgate's own tools: choose another name", n)
	}
	return n, nil
}

// checkCollisions refuses entries whose keys normalise to one name: their tools would
// share a namespace. Each colliding entry gets an error naming the others.
func checkCollisions(entries []Entry, container string) {
	byName := map[string][]int{}
	for i := range entries {
		if s := entries[i].Server; s != nil {
			byName[s.Name] = append(byName[s.Name], i)
		}
	}
	for name, idx := range byName {
		if len(idx) < 2 {
			continue
		}
		for _, i := range idx {
			var others []string
			for _, j := range idx {
				if j != i {
					others = append(others, fmt.Sprintf("%q", entries[j].Key))
				}
			}
			e := &entries[i]
			e.Diagnostics = append(e.Diagnostics, Diagnostic{
				Path: pathMember(container, e.Key), Severity: Error,
				Message: fmt.Sprintf("is the server name %q, as is %s: two servers cannot share a name", name, strings.Join(others, " and ")),
			})
			e.Server, e.Secrets = nil, nil
		}
	}
}
