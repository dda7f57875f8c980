package upstream

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/toolgate/toolgate/internal/rpcwire"
)

var progressTokenKey = []byte(`"progressToken"`)

// rewriteProgressToken replaces params._meta.progressToken with the upstream
// request id, so tokens of different callers sharing one connection cannot
// collide, and returns the caller's token to restore on the way back. Only the
// two edited objects are re-encoded (their keys end up sorted); every value,
// the other members included, keeps its bytes. ok is false, and params are
// returned unchanged, when there is no token.
func rewriteProgressToken(params json.RawMessage, id int64) (out, token json.RawMessage, ok bool) {
	if !bytes.Contains(params, progressTokenKey) {
		return params, nil, false
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(params, &top) != nil {
		return params, nil, false
	}
	var meta map[string]json.RawMessage
	if raw, has := top["_meta"]; !has || json.Unmarshal(raw, &meta) != nil {
		return params, nil, false
	}
	token, has := meta["progressToken"]
	if !has {
		return params, nil, false
	}
	meta["progressToken"] = strconv.AppendInt(nil, id, 10)
	var err error
	if top["_meta"], err = rpcwire.Encode(meta); err != nil {
		return params, nil, false
	}
	if out, err = rpcwire.Encode(top); err != nil {
		return params, nil, false
	}
	return out, token, true
}

// progressID reads the token of a notifications/progress: one of our request
// ids, as a number (or, from servers that stringify tokens, a string).
func progressID(params json.RawMessage) (int64, bool) {
	var p struct {
		ProgressToken json.RawMessage `json:"progressToken"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.ProgressToken) == 0 {
		return 0, false
	}
	tok := p.ProgressToken
	if tok[0] == '"' {
		var s string
		if json.Unmarshal(tok, &s) != nil {
			return 0, false
		}
		tok = []byte(s)
	}
	n, err := strconv.ParseInt(string(tok), 10, 64)
	return n, err == nil
}

// restoreProgressToken puts the caller's token back into a progress
// notification's params.
func restoreProgressToken(params, token json.RawMessage) (json.RawMessage, bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(params, &top) != nil {
		return nil, false
	}
	top["progressToken"] = token
	out, err := rpcwire.Encode(top)
	return out, err == nil
}
