package keystore

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
)

// Redacted is what every printed, logged or encoded Secret shows.
const Redacted = "[redacted]"

// Secret is a secret value in memory. Every way Go has of turning a value into text
// prints Redacted instead of the value: String, GoString, fmt's Format (all verbs,
// including %x, %q and %#v), MarshalJSON, MarshalText and slog's LogValue. So a Secret
// that reaches a log line, an error message or a response by accident shows nothing.
//
// The bytes are reachable only through a closure, on purpose: fmt prints an unexported
// field of a struct by walking into it with reflection, without calling its methods,
// and it would print a []byte, a struct or (under %s and %q, through its bad-verb path)
// even the target of a pointer. A func value is printed as an address whatever the
// verb, so a struct with an unexported Secret field shows an address, never the bytes.
//
// The zero Secret is empty. A Secret is immutable and safe to share between goroutines;
// Reveal hands out copies.
type Secret struct{ bytes func() []byte }

// hold returns a Secret over b, which it keeps (the caller gives b up).
func hold(b []byte) Secret { return Secret{bytes: func() []byte { return b }} }

// raw is the Secret's own bytes, nil for the zero Secret. Never hand it out.
func (s Secret) raw() []byte {
	if s.bytes == nil {
		return nil
	}
	return s.bytes()
}

// NewSecret returns a Secret holding a copy of b.
func NewSecret(b []byte) Secret { return hold(append([]byte(nil), b...)) }

// NewSecretString returns a Secret holding s.
func NewSecretString(s string) Secret { return hold([]byte(s)) }

// Reveal returns a copy of the value, for the code that starts the process or makes
// the request that needs it. Keep the copy no longer than that.
func (s Secret) Reveal() []byte {
	if s.bytes == nil {
		return nil
	}
	return append([]byte(nil), s.raw()...)
}

// RevealString returns the value as a string, for exec's environment and argument
// vectors and for HTTP header values, which Go takes as strings.
func (s Secret) RevealString() string { return string(s.raw()) }

// Use calls f with a copy of the value and overwrites the copy with zeros when f
// returns, for code that can consume the bytes within one call (a MAC, a write).
func (s Secret) Use(f func([]byte) error) error {
	b := s.Reveal()
	defer clear(b)
	return f(b)
}

// Len is the value's length in bytes. Lengths are not secret here: the sealed form
// shows them anyway.
func (s Secret) Len() int { return len(s.raw()) }

// Equal reports whether two secrets hold the same bytes, in time independent of where
// they differ.
func (s Secret) Equal(o Secret) bool {
	return subtle.ConstantTimeCompare(s.raw(), o.raw()) == 1
}

// String implements fmt.Stringer.
func (Secret) String() string { return Redacted }

// GoString implements fmt.GoStringer.
func (Secret) GoString() string { return Redacted }

// Format implements fmt.Formatter, so no verb or flag prints the bytes.
func (Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(Redacted)) }

// MarshalJSON implements json.Marshaler.
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + Redacted + `"`), nil }

// MarshalText implements encoding.TextMarshaler.
func (Secret) MarshalText() ([]byte, error) { return []byte(Redacted), nil }

// LogValue implements slog.LogValuer.
func (Secret) LogValue() slog.Value { return slog.StringValue(Redacted) }

// errDecodeSecret refuses decoding: a Secret read back from JSON or text would hold
// "[redacted]" and silently replace the real value.
var errDecodeSecret = errors.New("a keystore.Secret cannot be decoded: secrets enter through NewSecret and leave the keystore through Get")

// UnmarshalJSON refuses, see errDecodeSecret.
func (*Secret) UnmarshalJSON([]byte) error { return errDecodeSecret }

// UnmarshalText refuses, see errDecodeSecret.
func (*Secret) UnmarshalText([]byte) error { return errDecodeSecret }
