package audit

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// HashArgs replaces each top-level argument value with the hex HMAC-SHA256, under key,
// of the value's canonical JSON (object keys sorted, no HTML escaping, no trailing
// newline). The log thereby never holds a clear value that may be secret, yet an
// operator holding the key can check whether a known value was passed, and equal values
// hash equal within one installation. Argument names are kept: they are the tool's
// schema, not the caller's data.
//
// A value that cannot be encoded as JSON (NaN, a channel) is hashed from its fmt
// representation instead, so it is still never stored in clear.
//
// The kernel does not call it: it hashes each value's canonical bytes, which it already
// holds, with HashValue, and gets these same hashes without encoding anything again
// (docs/audit.md). HashArgs is the definition those bytes are checked against.
func HashArgs(key []byte, args map[string]any) map[string]string {
	if len(args) == 0 {
		return nil
	}
	out := make(map[string]string, len(args))
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for name, v := range args {
		buf.Reset()
		var data []byte
		if err := enc.Encode(v); err != nil {
			data = []byte(fmt.Sprintf("unencodable:%T:%v", v, v))
		} else {
			data = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		}
		out[name] = HashValue(key, data)
	}
	return out
}

// HashValue is the HMAC HashArgs applies to one value's canonical JSON; an operator uses
// it to look a known value up in the log.
func HashValue(key, canonicalJSON []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(canonicalJSON)
	return hex.EncodeToString(m.Sum(nil))
}
