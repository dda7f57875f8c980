package localtools

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/reqstate"
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

// stateSealer seals and opens ask_user's requestState values (internal/reqstate).
type stateSealer struct{ s *reqstate.Sealer }

func newStateSealer(key []byte) (*stateSealer, error) {
	s, err := reqstate.New(key)
	if err != nil {
		return nil, fmt.Errorf("ask_user state: %w", err)
	}
	return &stateSealer{s: s}, nil
}

// processSealer is the per-process sealer.
func processSealer() *stateSealer { return &stateSealer{s: reqstate.Process()} }

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
	return s.s.Seal(askStatePrefix, askStateAAD, askState{
		Principal: call.Principal,
		Tool:      call.Tool.ID,
		Args:      argsDigest(call.Args),
		Expires:   time.Now().Add(AskUserTimeout).UnixMilli(),
	})
}

// open authenticates and decodes a state; reqstate.ErrForged when it does not open.
func (s *stateSealer) open(token string) (askState, error) {
	var st askState
	err := s.s.Open(askStatePrefix, askStateAAD, token, &st)
	return st, err
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
