package localtools

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/kernel"
)

// ask_user's multi round-trip state (2026-07-28). The first round answers
// input_required with a requestState; the client echoes it on the retry that
// carries the person's answer. The client holds the state between the two
// requests, so it is attacker-controlled: it is sealed with AES-256-GCM under a
// key drawn when the process starts, and binds the principal, the tool, the
// original arguments and an expiry. A retry whose state fails any of these checks
// is refused invalid_request_state; nothing in the state is trusted otherwise.
//
// The key never leaves the process, so a state is good only in the process that
// issued it: a retry that reaches a restarted toolgate is refused, and the client
// asks again. Replay within the TTL by the same principal with the same arguments
// is accepted on purpose: the state authorizes nothing by itself (the retry is
// authorized and audited like any call), and the answer comes from the client
// either way.

// askStatePrefix versions the requestState format.
const askStatePrefix = "tg1."

// maxAskStateLen bounds a requestState before any decoding work is done.
const maxAskStateLen = 4096

// askInputKey names ask_user's one input request in inputRequests and inputResponses.
const askInputKey = "ask_user"

// askStateAAD ties a sealed state to its purpose, so a value sealed for anything
// else under the same key never opens as ask_user state.
var askStateAAD = []byte("toolgate/ask_user/requestState/v1")

// askState is the sealed content of a requestState.
type askState struct {
	Principal string `json:"p"`
	Tool      string `json:"t"`
	Args      []byte `json:"a"` // SHA-256 of the arguments as parsed (sorted keys, numbers as written)
	Expires   int64  `json:"e"` // Unix milliseconds
}

// stateSealer seals and opens requestState values with one key.
type stateSealer struct{ aead cipher.AEAD }

func newStateSealer(key []byte) (*stateSealer, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("ask_user state key: %w", err)
	}
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, fmt.Errorf("ask_user state cipher: %w", err)
	}
	return &stateSealer{aead: aead}, nil
}

// processSealer is the per-process sealer, created on first use.
var processSealer = sync.OnceValue(func() *stateSealer {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read never fails (it aborts the program instead)
	s, err := newStateSealer(key)
	if err != nil {
		panic(err) // a 32-byte key is always valid for AES-256-GCM
	}
	return s
})

// argsDigest hashes the parsed arguments. encoding/json sorts map keys and writes
// json.Number exactly as the caller did, so the same arguments give the same digest.
func argsDigest(args map[string]any) []byte {
	b, err := json.Marshal(args)
	if err != nil {
		return nil
	}
	sum := sha256.Sum256(b)
	return sum[:]
}

// issue seals a state for call, valid for AskUserTimeout from now.
func (s *stateSealer) issue(call *kernel.Call) (string, error) {
	plain, err := json.Marshal(askState{
		Principal: call.Principal,
		Tool:      call.Tool.ID,
		Args:      argsDigest(call.Args),
		Expires:   time.Now().Add(AskUserTimeout).UnixMilli(),
	})
	if err != nil {
		return "", fmt.Errorf("encoding ask_user state: %w", err)
	}
	// The AEAD draws a fresh random nonce per seal and prepends it (Overhead counts it).
	sealed := s.aead.Seal(nil, nil, plain, askStateAAD)
	return askStatePrefix + base64.RawURLEncoding.EncodeToString(sealed), nil
}

// errForgedState is any requestState that does not open under this process's key.
var errForgedState = errors.New("forged")

// open authenticates and decodes a state; errForgedState when it does not open.
func (s *stateSealer) open(token string) (askState, error) {
	var st askState
	// Only the exact issued text opens: the decoder would skip line breaks and,
	// without Strict, accept other encodings of the same bytes.
	if len(token) > maxAskStateLen || !strings.HasPrefix(token, askStatePrefix) || strings.ContainsAny(token, "\r\n") {
		return st, errForgedState
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(token[len(askStatePrefix):])
	if err != nil || len(raw) < s.aead.Overhead() {
		return st, errForgedState
	}
	plain, err := s.aead.Open(nil, nil, raw, askStateAAD)
	if err != nil {
		return st, errForgedState
	}
	if err := json.Unmarshal(plain, &st); err != nil {
		return st, errForgedState
	}
	return st, nil
}

// verify checks a retry's requestState against the call it arrived with. The
// error is an invalid_request_state refusal saying which check failed.
func (s *stateSealer) verify(call *kernel.Call) error {
	var token string
	if err := json.Unmarshal(call.RequestState, &token); err != nil {
		return kernel.Failed(kernel.CodeInvalidRequestState,
			"requestState must be the string ask_user issued; call ask_user again without it").WithRetryable(false)
	}
	st, err := s.open(token)
	if err != nil {
		return kernel.Failed(kernel.CodeInvalidRequestState,
			"requestState was not issued by this toolgate process or was altered; call ask_user again without it").WithRetryable(false)
	}
	switch {
	case st.Principal != call.Principal:
		return kernel.Failed(kernel.CodeInvalidRequestState, "requestState was issued to another principal").WithRetryable(false)
	case st.Tool != call.Tool.ID:
		return kernel.Failed(kernel.CodeInvalidRequestState, "requestState was issued for another tool").WithRetryable(false)
	case string(st.Args) != string(argsDigest(call.Args)):
		return kernel.Failed(kernel.CodeInvalidRequestState,
			"requestState was issued for other arguments; retry with the original arguments").WithRetryable(false)
	case time.Now().UnixMilli() > st.Expires:
		return kernel.Failed(kernel.CodeInvalidRequestState,
			"requestState expired (a question stays open for %s); call ask_user again without it", AskUserTimeout).WithRetryable(false)
	}
	return nil
}
