// Package exectoken mints and verifies execution tokens: short signed strings that say
// which principal and session a caller is. A token never carries authority: whoever
// presents one is still authorized by the kernel, per call, against a grant. That is why
// the claims hold an identity and a lifetime and nothing else.
//
// A token is "tgx1.<claims>.<mac>": claims is the base64url (unpadded) JSON
// {"p":principal,"s":session,"iat":unix,"exp":unix}, and mac the base64url HMAC-SHA256,
// under the installation's token key, of everything before the last dot. Times have
// one-second precision.
package exectoken

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Prefix starts every token of this format version.
const Prefix = "tgx1."

// MaxLen bounds what Verify will look at, so a hostile header costs nothing.
const MaxLen = 4096

// MinKeyLen is the shortest signing key accepted.
const MinKeyLen = 16

// maxField bounds the principal and session so a token stays well under MaxLen.
const maxField = 1024

// Errors Verify wraps; callers branch with errors.Is. Every failure is also ErrInvalid.

// StoreKeyName names the installation key tokens are signed with in the store, so the
// daemon and the CLI always sign and verify with the same key.
const StoreKeyName = "token"

var (
	ErrInvalid   = errors.New("invalid execution token")
	ErrMalformed = fmt.Errorf("%w: malformed", ErrInvalid)
	ErrForged    = fmt.Errorf("%w: signature does not match", ErrInvalid)
	ErrExpired   = fmt.Errorf("%w: expired", ErrInvalid)
	ErrNotYet    = fmt.Errorf("%w: issued in the future", ErrInvalid)
)

// ClockSkew is how far in the future a token's issue time may lie and still verify.
const ClockSkew = time.Minute

// Claims is what a token says: who, in which session, and for how long.
type Claims struct {
	Principal, Session string
	IssuedAt, Expires  time.Time
}

type wireClaims struct {
	P   string `json:"p"`
	S   string `json:"s"`
	Iat int64  `json:"iat"`
	Exp int64  `json:"exp"`
}

var b64 = base64.RawURLEncoding.Strict()

// decodeB64 decodes unpadded base64url, refusing every byte outside its alphabet first:
// encoding/base64 skips '\r' and '\n' even in Strict mode, which would let one token
// be spelled many ways.
func decodeB64(s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return nil, fmt.Errorf("byte %#x at %d is not base64url", c, i)
		}
	}
	return b64.DecodeString(s)
}

// Mint signs c with key. The principal must be non-empty; the principal and session are
// printable UTF-8 of at most 1024 bytes; Expires must be after IssuedAt.
func Mint(key []byte, c Claims) (string, error) {
	if len(key) < MinKeyLen {
		return "", fmt.Errorf("minting execution token: key is %d bytes, want at least %d", len(key), MinKeyLen)
	}
	if c.Principal == "" {
		return "", errors.New("minting execution token: empty principal")
	}
	for name, v := range map[string]string{"principal": c.Principal, "session": c.Session} {
		if err := checkField(v); err != nil {
			return "", fmt.Errorf("minting execution token: %s: %w", name, err)
		}
	}
	iat, exp := c.IssuedAt.Unix(), c.Expires.Unix()
	if exp <= iat {
		return "", fmt.Errorf("minting execution token: expiry %s is not after issue time %s",
			c.Expires.UTC().Format(time.RFC3339), c.IssuedAt.UTC().Format(time.RFC3339))
	}
	body, err := json.Marshal(wireClaims{P: c.Principal, S: c.Session, Iat: iat, Exp: exp})
	if err != nil {
		return "", fmt.Errorf("minting execution token: %w", err)
	}
	signed := Prefix + b64.EncodeToString(body)
	return signed + "." + b64.EncodeToString(mac(key, signed)), nil
}

func checkField(s string) error {
	if len(s) > maxField {
		return fmt.Errorf("%d bytes, at most %d", len(s), maxField)
	}
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8")
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("control character %U", r)
		}
	}
	return nil
}

func mac(key []byte, signed string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(signed))
	return m.Sum(nil)
}

// Verify checks tok's signature with key (constant-time), then its lifetime at now, and
// returns its claims. Failures wrap ErrMalformed, ErrForged, ErrExpired or ErrNotYet
// (all ErrInvalid); the signature is checked before the claims are even decoded, so a
// forged token learns nothing from the error.
func Verify(key []byte, tok string, now time.Time) (Claims, error) {
	if len(key) < MinKeyLen {
		return Claims{}, fmt.Errorf("verifying execution token: key is %d bytes, want at least %d", len(key), MinKeyLen)
	}
	if len(tok) > MaxLen {
		return Claims{}, fmt.Errorf("%w: longer than %d bytes", ErrMalformed, MaxLen)
	}
	if !strings.HasPrefix(tok, Prefix) {
		return Claims{}, fmt.Errorf("%w: does not start with %q", ErrMalformed, Prefix)
	}
	dot := strings.LastIndexByte(tok, '.')
	signed, sig := tok[:dot], tok[dot+1:]
	if dot < len(Prefix) || strings.Count(tok, ".") != 2 {
		return Claims{}, fmt.Errorf("%w: want three dot-separated parts", ErrMalformed)
	}
	gotMAC, err := decodeB64(sig)
	if err != nil || len(gotMAC) != sha256.Size {
		return Claims{}, fmt.Errorf("%w: signature is not %d bytes of base64url", ErrMalformed, sha256.Size)
	}
	if !hmac.Equal(gotMAC, mac(key, signed)) {
		return Claims{}, ErrForged
	}
	body, err := decodeB64(signed[len(Prefix):])
	if err != nil {
		return Claims{}, fmt.Errorf("%w: claims are not base64url", ErrMalformed)
	}
	var w wireClaims
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil || dec.More() {
		return Claims{}, fmt.Errorf("%w: claims are not the expected JSON", ErrMalformed)
	}
	if w.P == "" || w.Exp <= w.Iat {
		return Claims{}, fmt.Errorf("%w: claims lack a principal or a valid lifetime", ErrMalformed)
	}
	c := Claims{Principal: w.P, Session: w.S, IssuedAt: time.Unix(w.Iat, 0).UTC(), Expires: time.Unix(w.Exp, 0).UTC()}
	if !now.Before(c.Expires) {
		return Claims{}, fmt.Errorf("%w at %s", ErrExpired, c.Expires.Format(time.RFC3339))
	}
	if c.IssuedAt.After(now.Add(ClockSkew)) {
		return Claims{}, fmt.Errorf("%w (%s)", ErrNotYet, c.IssuedAt.Format(time.RFC3339))
	}
	return c, nil
}
