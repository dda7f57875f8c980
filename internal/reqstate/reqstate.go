// Package reqstate seals the requestState values toolgate issues in the 2026-07-28
// revision's multi round-trip (docs/http-contract.md, "The stateless 2026-07-28
// revision"): the client holds the state between two requests, so it is
// attacker-controlled, and is sealed with AES-256-GCM under a key drawn when the
// process starts. Each kind of state has its own prefix and additional data, so a
// value sealed for one purpose never opens as another's. What a state binds (the
// principal, the tool, the arguments, an expiry) and how a retry is checked against
// it is each user's own (internal/localtools' ask_user, internal/upstreamtools).
package reqstate

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// MaxLen bounds a requestState before any decoding work is done.
const MaxLen = 4096

// ErrForged is any state that does not open under this sealer's key for the purpose
// asked: altered, issued by another process (or before a restart), or for another
// purpose.
var ErrForged = errors.New("reqstate: the requestState was not issued here or was altered")

// Sealer seals and opens states with one key.
type Sealer struct{ aead cipher.AEAD }

// New returns a Sealer with a 32-byte key.
func New(key []byte) (*Sealer, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("requestState key: %w", err)
	}
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, fmt.Errorf("requestState cipher: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// Process is the per-process sealer, created on first use. Its key never leaves the
// process: a state is good only in the process that issued it.
var Process = sync.OnceValue(func() *Sealer {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read never fails (it aborts the program instead)
	s, err := New(key)
	if err != nil {
		panic(err) // a 32-byte key is always valid for AES-256-GCM
	}
	return s
})

// Seal encodes v as JSON and seals it for purpose: prefix + base64url(nonce ‖
// ciphertext), with aad authenticated beside it.
func (s *Sealer) Seal(prefix string, aad []byte, v any) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encoding requestState: %w", err)
	}
	// The AEAD draws a fresh random nonce per seal and prepends it (Overhead counts it).
	return prefix + base64.RawURLEncoding.EncodeToString(s.aead.Seal(nil, nil, plain, aad)), nil
}

// Open authenticates token for purpose and decodes it into v; ErrForged when it does
// not open. Only the exact issued text opens: the decoder would skip line breaks and,
// without Strict, accept other encodings of the same bytes.
func (s *Sealer) Open(prefix string, aad []byte, token string, v any) error {
	return s.OpenMax(prefix, aad, token, MaxLen, v)
}

// OpenMax is Open for a purpose whose states may be longer than MaxLen (one that
// carries another server's own requestState): token is refused unread past max.
func (s *Sealer) OpenMax(prefix string, aad []byte, token string, max int, v any) error {
	if len(token) > max || !strings.HasPrefix(token, prefix) || strings.ContainsAny(token, "\r\n") {
		return ErrForged
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(token[len(prefix):])
	if err != nil || len(raw) < s.aead.Overhead() {
		return ErrForged
	}
	plain, err := s.aead.Open(nil, nil, raw, aad)
	if err != nil {
		return ErrForged
	}
	if err := json.Unmarshal(plain, v); err != nil {
		return ErrForged
	}
	return nil
}
