package localtools

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/reqstate"
)

const elicitCaps = `{"elicitation":{"form":{}}}`

// modernCall is a 2026-07-28 ask_user call as the kernel builds it.
func modernCall(tl *kernel.Tool, principal string, args map[string]any, caps string, state, responses json.RawMessage) *kernel.Call {
	return &kernel.Call{ID: "c1", Principal: principal, Tool: tl, Args: args, Peer: &fakePeer{caps: caps},
		ProtocolVersion: mcpspec.ModernVersion, RequestState: state, InputResponses: responses}
}

// firstRound runs the first call and returns its requestState (as sent on the wire).
func firstRound(t *testing.T, tl *kernel.Tool, principal string, args map[string]any) json.RawMessage {
	t.Helper()
	out, err := tl.Run(context.Background(), modernCall(tl, principal, args, elicitCaps, nil, nil))
	if err != nil {
		t.Fatalf("first round: %v", err)
	}
	if len(out.RequestState) == 0 || len(out.InputRequests) == 0 || out.Text != "" {
		t.Fatalf("first round is not input_required: %+v", out)
	}
	return out.RequestState
}

func accepted(answer string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{askInputKey: map[string]any{"action": "accept", "content": map[string]any{"answer": answer}}})
	return b
}

// In 2026-07-28 ask_user never sends a server-to-client request: it answers
// input_required with the same form the older era sends, and the retry that
// carries the sealed state and the answer finishes the call.
func TestAskUserRoundTrip(t *testing.T) {
	f := newFixture(t)
	au := f.tool(t, "local.ask_user")
	args := map[string]any{"question": "Merge?"}
	peer := &fakePeer{caps: elicitCaps}
	c := modernCall(au, "alice", args, elicitCaps, nil, nil)
	c.Peer = peer
	out, err := au.Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if peer.got != nil {
		t.Errorf("a 2026-07-28 call sent a server-to-client request: %v", peer.got)
	}
	var reqs map[string]struct {
		Method string         `json:"method"`
		Params map[string]any `json:"params"`
	}
	if err := json.Unmarshal(out.InputRequests, &reqs); err != nil || len(reqs) != 1 {
		t.Fatalf("inputRequests = %s (%v)", out.InputRequests, err)
	}
	r := reqs[askInputKey]
	schema, _ := json.Marshal(r.Params["requestedSchema"])
	wantSchema, _ := json.Marshal(askParams("")["requestedSchema"])
	if r.Method != "elicitation/create" || r.Params["message"] != "Merge?" || string(schema) != string(wantSchema) {
		t.Errorf("input request = %+v", r)
	}
	var state string
	if json.Unmarshal(out.RequestState, &state) != nil || !strings.HasPrefix(state, askStatePrefix) || strings.Contains(state, "alice") {
		t.Errorf("requestState = %s", out.RequestState)
	}

	retry := func(responses json.RawMessage) (*kernel.Output, error) {
		return au.Run(context.Background(), modernCall(au, "alice", map[string]any{"question": "Merge?"}, elicitCaps, out.RequestState, responses))
	}
	if got, err := retry(accepted("yes, merge")); err != nil || got.Text != "yes, merge" || got.InputRequests != nil {
		t.Errorf("retry with the answer = %+v, %v", got, err)
	}
	// Unknown keys are ignored.
	withExtra := json.RawMessage(`{"other":{"action":"accept","content":{"answer":"no"}},"ask_user":{"action":"decline"}}`)
	if got, err := retry(withExtra); err != nil || !strings.Contains(got.Text, "declined") {
		t.Errorf("retry declining = %+v, %v", got, err)
	}
	if got, err := retry(json.RawMessage(`{"ask_user":{"action":"cancel"}}`)); err != nil || !strings.Contains(got.Text, "dismissed") {
		t.Errorf("retry cancelling = %+v, %v", got, err)
	}
	// A verified retry without the answer asks again, with a fresh state.
	for _, missing := range []json.RawMessage{nil, json.RawMessage(`{}`), json.RawMessage(`{"ask_user":null}`), json.RawMessage(`[1]`)} {
		got, err := retry(missing)
		if err != nil || len(got.InputRequests) == 0 || len(got.RequestState) == 0 {
			t.Errorf("retry with %s = %+v, %v; want input_required", missing, got, err)
		}
	}
	// Malformed answers are failures, not answers.
	for _, bad := range []string{`{"ask_user":"yes"}`, `{"ask_user":{"action":"accept","content":{"answer":5}}}`, `{"ask_user":{"action":"maybe"}}`} {
		if _, err := retry(json.RawMessage(bad)); codeOf(err) != kernel.CodeToolFailed {
			t.Errorf("retry with %s = %v; want tool_failed", bad, err)
		}
	}
	// An answer without a state this process issued is not trusted: the
	// question is asked again.
	got, err := au.Run(context.Background(), modernCall(au, "alice", args, elicitCaps, nil, accepted("forged answer")))
	if err != nil || got.Text != "" || len(got.InputRequests) == 0 {
		t.Errorf("unsolicited inputResponses = %+v, %v", got, err)
	}
}

// A 2026-07-28 client that did not declare elicitation in this request is not
// asked (the spec forbids requesting undeclared input): a clear failure instead.
func TestAskUserRoundTripWithoutElicitation(t *testing.T) {
	f := newFixture(t)
	au := f.tool(t, "local.ask_user")
	for _, caps := range []string{`{}`, `{"sampling":{}}`, `{"elicitation":{"url":{}}}`, ``} {
		_, err := au.Run(context.Background(), modernCall(au, "p", map[string]any{"question": "?"}, caps, nil, nil))
		if codeOf(err) != kernel.CodeToolFailed || !strings.Contains(err.Error(), "do not declare elicitation") {
			t.Errorf("caps %q: %v", caps, err)
		}
	}
}

// Every way a requestState can be wrong is refused invalid_request_state, and
// the message says which.
func TestAskUserRequestStateRefused(t *testing.T) {
	f := newFixture(t)
	au := f.tool(t, "local.ask_user")
	args := map[string]any{"question": "Deploy?"}
	good := firstRound(t, au, "alice", args)
	var token string
	if err := json.Unmarshal(good, &token); err != nil {
		t.Fatal(err)
	}
	quote := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	body := token[len(askStatePrefix):]
	raw, _ := base64.RawURLEncoding.DecodeString(body)
	flipped := append([]byte(nil), raw...)
	flipped[len(flipped)/2] ^= 0x01
	other, err := newStateSealer(make([]byte, 32)) // another process's key
	if err != nil {
		t.Fatal(err)
	}
	foreignKey, _ := other.issue(modernCall(au, "alice", args, elicitCaps, nil, nil))
	renamed := *au
	renamed.ID = "local.ask_someone"

	for _, c := range []struct {
		name      string
		principal string
		tool      *kernel.Tool
		args      map[string]any
		state     json.RawMessage
		want      string
	}{
		{"bit flipped", "alice", au, args, quote(askStatePrefix + base64.RawURLEncoding.EncodeToString(flipped)), "altered"},
		{"truncated", "alice", au, args, quote(token[:len(token)-4]), "altered"},
		{"other prefix", "alice", au, args, quote("tg2." + body), "altered"},
		{"not base64", "alice", au, args, quote(askStatePrefix + "!!!"), "altered"},
		{"empty", "alice", au, args, quote(""), "altered"},
		{"too long", "alice", au, args, quote(askStatePrefix + strings.Repeat("A", reqstate.MaxLen)), "altered"},
		{"another process's key", "alice", au, args, quote(foreignKey), "altered"},
		{"not a string", "alice", au, args, json.RawMessage(`{"p":"alice"}`), "must be the string"},
		{"a number", "alice", au, args, json.RawMessage(`1`), "must be the string"},
		{"replayed by another principal", "mallory", au, args, good, "another principal"},
		{"other tool", "alice", &renamed, args, good, "another tool"},
		{"other arguments", "alice", au, map[string]any{"question": "Delete everything?"}, good, "other arguments"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.tool.Run(context.Background(), modernCall(c.tool, c.principal, c.args, elicitCaps, c.state, accepted("yes")))
			if codeOf(err) != kernel.CodeInvalidRequestState || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v; want invalid_request_state saying %q", err, c.want)
			}
			var ke *kernel.Error
			if errors.As(err, &ke); ke.Status != kernel.StatusFailed || ke.Retryable == nil || *ke.Retryable {
				t.Errorf("refusal %+v", ke)
			}
		})
	}
	// The good state still works for its own principal, tool and arguments.
	if out, err := au.Run(context.Background(), modernCall(au, "alice", args, elicitCaps, good, accepted("ok"))); err != nil || out.Text != "ok" {
		t.Errorf("good state = %+v, %v", out, err)
	}
}

// A requestState is good for AskUserTimeout after it was issued, and refused
// after that (fake time: synctest's clock).
func TestAskUserRequestStateExpires(t *testing.T) {
	f := newFixture(t)
	au := f.tool(t, "local.ask_user")
	synctest.Test(t, func(t *testing.T) {
		s, err := newStateSealer(make([]byte, 32))
		if err != nil {
			t.Fatal(err)
		}
		args := map[string]any{"question": "Still there?"}
		out, err := askUserRoundTrip(modernCall(au, "p", args, elicitCaps, nil, nil), "Still there?", s)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(AskUserTimeout - time.Second)
		if got, err := askUserRoundTrip(modernCall(au, "p", args, elicitCaps, out.RequestState, accepted("yes")), "Still there?", s); err != nil || got.Text != "yes" {
			t.Errorf("just before expiry: %+v, %v", got, err)
		}
		time.Sleep(2 * time.Second)
		_, err = askUserRoundTrip(modernCall(au, "p", args, elicitCaps, out.RequestState, accepted("yes")), "Still there?", s)
		if codeOf(err) != kernel.CodeInvalidRequestState || !strings.Contains(err.Error(), "expired") {
			t.Errorf("after expiry: %v", err)
		}
	})
}

// In a session opened by initialize, a call never carries round-trip fields
// and ask_user elicits through the Peer as before, whatever state is sent.
func TestAskUserLegacyIgnoresRoundTrip(t *testing.T) {
	f := newFixture(t)
	au := f.tool(t, "local.ask_user")
	peer := &fakePeer{caps: `{"elicitation":{}}`, answer: `{"action":"accept","content":{"answer":"via peer"}}`}
	out, err := au.Run(context.Background(), &kernel.Call{Principal: "p", Tool: au, Args: map[string]any{"question": "?"}, Peer: peer,
		RequestState: json.RawMessage(`"tg1.garbage"`), InputResponses: accepted("smuggled")})
	if err != nil || out.Text != "via peer" || out.InputRequests != nil {
		t.Errorf("legacy = %+v, %v", out, err)
	}
}

// FuzzAskUserRequestState: no client-supplied state panics, and none but the
// ones issued verifies.
func FuzzAskUserRequestState(f *testing.F) {
	s, err := newStateSealer(make([]byte, 32))
	if err != nil {
		f.Fatal(err)
	}
	tl := &kernel.Tool{ID: "local.ask_user"}
	call := &kernel.Call{Principal: "p", Tool: tl, Args: map[string]any{"question": "q"}}
	// Sealed with a fixed nonce so that every fuzz worker process has the same one: the
	// sealer's AEAD draws its nonce itself, so the seed is sealed by a plain AES-GCM under
	// the same key, whose nonce||ciphertext||tag is the format the sealer opens.
	plain, _ := json.Marshal(askState{Principal: "p", Tool: tl.ID, Args: argsDigest(call.Args), Expires: 1 << 62})
	block, _ := aes.NewCipher(make([]byte, 32))
	fixed, _ := cipher.NewGCM(block)
	nonce := make([]byte, fixed.NonceSize())
	good := askStatePrefix + base64.RawURLEncoding.EncodeToString(fixed.Seal(nonce, nonce, plain, askStateAAD))
	if s.verify(&kernel.Call{Principal: "p", Tool: tl, Args: call.Args, RequestState: mustQuote(good)}) != nil {
		f.Fatal("the seed state does not verify")
	}
	for _, seed := range []string{good, "", "tg1.", "tg1.AAAA", good[:len(good)-1], strings.ToUpper(good), "\"x\"", "null"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, token string) {
		st, err := s.open(token)
		if err == nil && token != good {
			// Only a sealed value opens; a fuzzer cannot forge GCM's tag.
			t.Errorf("opened a state that was never issued: %q → %+v", token, st)
		}
		c := *call
		c.RequestState = mustQuote(token)
		_ = s.verify(&c)
		c.RequestState = json.RawMessage(token)
		_ = s.verify(&c)
	})
}

func mustQuote(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// BenchmarkAskUserRequestState: sealing a state on the first round and
// verifying it on the retry.
func BenchmarkAskUserRequestState(b *testing.B) {
	s, err := newStateSealer(make([]byte, 32))
	if err != nil {
		b.Fatal(err)
	}
	tl := &kernel.Tool{ID: "local.ask_user"}
	call := &kernel.Call{Principal: "default", Tool: tl, Args: map[string]any{"question": "Proceed with merge?"}}
	for b.Loop() {
		tok, err := s.issue(call)
		if err != nil {
			b.Fatal(err)
		}
		c := *call
		c.RequestState = mustQuote(tok)
		if err := s.verify(&c); err != nil {
			b.Fatal(err)
		}
	}
}
