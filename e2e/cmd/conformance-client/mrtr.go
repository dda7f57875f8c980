package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sort"
)

// maxRounds bounds the input_required rounds of one request.
const maxRounds = 4

// resolve is a harness's side of a stateless request that may answer
// input_required: each input request is answered, and the request is sent
// again — a new request, with a new id — with the original params plus
// inputResponses and the server's requestState, echoed byte for byte (and
// left out when the server sent none). toolgate passes all of it through as
// raw bytes; answering is the harness's business.
func resolve(ctx context.Context, h harness, method string, params json.RawMessage) (json.RawMessage, error) {
	sent := params
	for round := 0; ; round++ {
		res, err := h.Call(ctx, method, sent)
		if err != nil || !isInputRequired(res) {
			return res, err
		}
		if round+1 == maxRounds {
			return nil, errors.New("still input_required after several rounds")
		}
		var r struct {
			InputRequests map[string]struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			} `json:"inputRequests"`
			RequestState json.RawMessage `json:"requestState"`
		}
		if err := json.Unmarshal(res, &r); err != nil {
			return nil, err
		}
		keys := make([]string, 0, len(r.InputRequests))
		for k := range r.InputRequests {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var responses bytes.Buffer
		responses.WriteByte('{')
		for i, k := range keys {
			ir := r.InputRequests[k]
			answer := inputResponse(ir.Method, ir.Params)
			if answer == nil {
				return nil, errors.New("cannot answer input request " + ir.Method)
			}
			if i > 0 {
				responses.WriteByte(',')
			}
			key, _ := json.Marshal(k)
			responses.Write(key)
			responses.WriteByte(':')
			responses.Write(answer)
		}
		responses.WriteByte('}')
		if sent, err = retryParams(params, responses.Bytes(), r.RequestState); err != nil {
			return nil, err
		}
	}
}

// retryParams is the original params with inputResponses and, when the
// server sent one, requestState appended: no other byte changes.
func retryParams(params, responses, state json.RawMessage) (json.RawMessage, error) {
	p := bytes.TrimSpace(params)
	if len(p) < 2 || p[0] != '{' || p[len(p)-1] != '}' {
		return nil, errors.New("params are not an object")
	}
	out := append([]byte(nil), p[:len(p)-1]...)
	if len(bytes.TrimSpace(p[1:len(p)-1])) > 0 {
		out = append(out, ',')
	}
	out = append(out, `"inputResponses":`...)
	out = append(out, responses...)
	if len(state) > 0 && !bytes.Equal(state, []byte("null")) {
		out = append(out, `,"requestState":`...)
		out = append(out, state...)
	}
	return append(out, '}'), nil
}

// inputResponse is what the harness answers to a server's request for input
// (over input_required, or as a request in the older revisions): accept an
// elicitation as a person accepting the form as offered would (each field's
// default, yes for a yes/no question without one), an empty root list, a
// canned sampling answer.
func inputResponse(method string, params json.RawMessage) json.RawMessage {
	switch method {
	case "elicitation/create":
		var p struct {
			RequestedSchema struct {
				Properties map[string]struct {
					Type    string          `json:"type"`
					Default json.RawMessage `json:"default"`
				} `json:"properties"`
			} `json:"requestedSchema"`
		}
		_ = json.Unmarshal(params, &p)
		content := map[string]json.RawMessage{}
		for name, prop := range p.RequestedSchema.Properties {
			switch {
			case prop.Default != nil:
				content[name] = prop.Default
			case prop.Type == "boolean":
				content[name] = json.RawMessage(`true`)
			}
		}
		b, _ := json.Marshal(map[string]any{"action": "accept", "content": content})
		return b
	case "roots/list":
		return json.RawMessage(`{"roots":[]}`)
	case "sampling/createMessage":
		return json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"ok"},"model":"toolgate-conformance"}`)
	}
	return nil
}
