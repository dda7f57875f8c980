package upstream

import (
	"bytes"
	"encoding/json"
	"strconv"
)

var progressTokenKey = []byte(`"progressToken"`)

// rewriteProgressToken replaces params._meta.progressToken with the upstream
// request id, so tokens of different callers sharing one connection cannot
// collide, and returns the caller's token to restore on the way back. Only the
// token's bytes change: everything else keeps its bytes and its order. ok is
// false, and params are returned unchanged, when there is no token.
func rewriteProgressToken(params json.RawMessage, id int64) (out, token json.RawMessage, ok bool) {
	if !bytes.Contains(params, progressTokenKey) {
		return params, nil, false
	}
	ms, me, ok := memberValue(params, "_meta")
	if !ok {
		return params, nil, false
	}
	ts, te, ok := memberValue(params[ms:me], "progressToken")
	if !ok {
		return params, nil, false
	}
	ts, te = ms+ts, ms+te
	token = bytes.Clone(params[ts:te])
	out = make(json.RawMessage, 0, len(params)+20)
	out = append(out, params[:ts]...)
	out = strconv.AppendInt(out, id, 10)
	out = append(out, params[te:]...)
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
// notification's params, changing no other byte.
func restoreProgressToken(params, token json.RawMessage) (json.RawMessage, bool) {
	s, e, ok := memberValue(params, "progressToken")
	if !ok {
		return nil, false
	}
	out := make(json.RawMessage, 0, len(params)-(e-s)+len(token))
	out = append(out, params[:s]...)
	out = append(out, token...)
	out = append(out, params[e:]...)
	return out, true
}

// memberValue finds the bytes of the value of member key in the JSON object
// obj (the last one, as decoders keep the last of duplicate members), as the
// range obj[start:end].
func memberValue(obj []byte, key string) (start, end int, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return 0, 0, false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return 0, 0, false
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return 0, 0, false
		}
		if k, _ := t.(string); k == key {
			end = int(dec.InputOffset())
			start, ok = end-len(raw), true
		}
	}
	return start, end, ok
}
