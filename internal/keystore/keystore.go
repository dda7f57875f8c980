// Package keystore keeps the secrets of installed upstream servers (their env values,
// header values and credential arguments) encrypted at rest, and hands them out only
// to the code that starts a process or makes a request with them.
//
// Each secret is sealed with AES-256-GCM (cipher.NewGCMWithRandomNonce: a fresh random
// nonce per seal, prepended to the ciphertext). The additional data binds a ciphertext
// to its Ref (scope, server, name), so a ciphertext copied or moved to another ref does
// not open. The master key lives in its own owner-only file, keystore.key, in the data
// directory, never in the database: a copy of the database alone reveals no secret.
// Sealed blobs are kept by a Backend (the store's secrets table in production); the
// backend never sees a key or a clear value.
//
// The format, the checks on the key file and what the keystore does not protect against
// are described in docs/keystore.md.
package keystore

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxSecretBytes bounds one secret value. It is far above any token, PEM key or JSON
// credential file a server is configured with, and keeps one value from growing the
// database without bound.
const MaxSecretBytes = 64 << 10

// MaxSealedBytes is the largest blob a Backend is handed: a MaxSecretBytes value plus
// the sealing overhead. A backend must store blobs at least this large.
const MaxSealedBytes = MaxSecretBytes + sealOverhead

// MaxRefPart bounds each of a Ref's scope, server and name.
const MaxRefPart = 256

// ErrNotFound is wrapped when no secret is stored under a ref.
var ErrNotFound = errors.New("secret not found")

// ErrInvalid is wrapped when a ref or value is refused before anything is stored.
var ErrInvalid = errors.New("invalid secret")

// ErrTampered is wrapped when a stored blob does not open: it was altered, truncated,
// moved to another ref, or sealed under another key.
var ErrTampered = errors.New("sealed secret does not open (altered, moved to another ref, or sealed under another key)")

// Ref names one secret: the scope it belongs to (for example "user" or
// "workspace:ws_…", as the installer decides), the server's name, and the secret's
// name within that server ("env.GITHUB_TOKEN", "header.Authorization", …). None of
// the three is secret; all three are bound into the ciphertext.
type Ref struct {
	Scope  string
	Server string
	Name   string
}

// ID is the ref's public id, "sec_" plus 20 hex digits of a hash of the ref, as
// responses show it in place of the value. It is the same on every run and in every
// data directory, and reveals nothing about the value.
func (r Ref) ID() string {
	h := sha256.New()
	h.Write([]byte("toolgate/keystore/ref/v1"))
	for _, p := range [...]string{r.Scope, r.Server, r.Name} {
		h.Write(binary.AppendUvarint(nil, uint64(len(p))))
		h.Write([]byte(p))
	}
	return "sec_" + hex.EncodeToString(h.Sum(nil))[:20]
}

// String shows the ref (never the value).
func (r Ref) String() string { return fmt.Sprintf("%s/%s/%s", r.Scope, r.Server, r.Name) }

// Validate refuses a ref any part of which is empty, longer than MaxRefPart, not UTF-8,
// or holds a control character or leading or trailing space.
func (r Ref) Validate() error {
	for _, p := range [...]struct{ field, v string }{{"scope", r.Scope}, {"server", r.Server}, {"name", r.Name}} {
		if err := checkPart(p.field, p.v); err != nil {
			return err
		}
	}
	return nil
}

func checkPart(field, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%w: %s is empty", ErrInvalid, field)
	case len(v) > MaxRefPart:
		return fmt.Errorf("%w: %s is %d bytes, at most %d", ErrInvalid, field, len(v), MaxRefPart)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, field)
	case strings.TrimSpace(v) != v:
		return fmt.Errorf("%w: %s %q has leading or trailing space", ErrInvalid, field, v)
	}
	for _, c := range v {
		if c < 0x20 || c >= 0x7f && c < 0xa0 {
			return fmt.Errorf("%w: %s %q holds control character %U", ErrInvalid, field, v, c)
		}
	}
	return nil
}

// Backend keeps sealed blobs by (scope, server, name). The keystore owns this interface;
// internal/store implements it with its secrets table, keystoretest with a map. Blobs
// are opaque to the backend: it stores and returns them byte-exact.
//
// Implementations must be safe for concurrent use. PutSecret replaces any blob under the
// same ref. GetSecret of a ref that holds nothing returns ok false and a nil error.
// DeleteSecret of such a ref is not an error. ListSecrets returns the names stored for
// one scope and server, sorted, and an empty list when there are none.
type Backend interface {
	PutSecret(ctx context.Context, scope, server, name string, sealed []byte) error
	GetSecret(ctx context.Context, scope, server, name string) (sealed []byte, ok bool, err error)
	DeleteSecret(ctx context.Context, scope, server, name string) error
	ListSecrets(ctx context.Context, scope, server string) ([]string, error)
}

// Keystore seals, stores, opens and digests secrets. It is safe for concurrent use and
// holds no lock: every method is one backend call plus a seal or an open.
type Keystore struct {
	keyPath   string
	aead      cipher.AEAD
	digestKey []byte
	backend   Backend
}

// Key derivation labels: the file's key is never used directly, so sealing and
// digesting can never be confused with each other or with a future use.
const (
	sealInfo   = "toolgate keystore: secret sealing v1"
	digestInfo = "toolgate keystore: secret digests v1"
)

// Open returns the keystore of dataDir over backend, reading dataDir/keystore.key or
// creating it (0600) on first use. A key file that is not a regular file, belongs to
// another user, is accessible by group or others, or has the wrong size is refused
// with an error naming the file and the fix.
func Open(dataDir string, backend Backend) (*Keystore, error) {
	if dataDir == "" {
		return nil, errors.New("opening keystore: empty data directory")
	}
	if backend == nil {
		return nil, errors.New("opening keystore: no backend")
	}
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, fmt.Errorf("opening keystore: %w", err)
	}
	master, err := loadKey(dir)
	if err != nil {
		return nil, err
	}
	defer clear(master)
	sealKey, err := hkdf.Key(sha256.New, master, nil, sealInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("opening keystore: deriving the sealing key: %w", err)
	}
	digestKey, err := hkdf.Key(sha256.New, master, nil, digestInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("opening keystore: deriving the digest key: %w", err)
	}
	block, err := aes.NewCipher(sealKey)
	clear(sealKey)
	if err != nil {
		return nil, fmt.Errorf("opening keystore: %w", err)
	}
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, fmt.Errorf("opening keystore: %w", err)
	}
	return &Keystore{keyPath: filepath.Join(dir, KeyFile), aead: aead, digestKey: digestKey, backend: backend}, nil
}

// KeyPath is the key file's path.
func (k *Keystore) KeyPath() string { return k.keyPath }

// Put seals s and stores it under ref, replacing what was there.
func (k *Keystore) Put(ctx context.Context, ref Ref, s Secret) error {
	if err := ref.Validate(); err != nil {
		return fmt.Errorf("storing secret %s: %w", ref.ID(), err)
	}
	if s.Len() > MaxSecretBytes {
		return fmt.Errorf("storing secret %s: %w: value is %d bytes, at most %d", ref, ErrInvalid, s.Len(), MaxSecretBytes)
	}
	var sealed []byte
	_ = s.Use(func(b []byte) error {
		sealed = k.seal(ref, b)
		return nil
	})
	if err := k.backend.PutSecret(ctx, ref.Scope, ref.Server, ref.Name, sealed); err != nil {
		return fmt.Errorf("storing secret %s: %w", ref, err)
	}
	return nil
}

// Get reads and opens the secret under ref. Call it where the value is used (to start
// the process, to make the request), not earlier. ErrNotFound when nothing is stored;
// ErrTampered when the blob does not open.
func (k *Keystore) Get(ctx context.Context, ref Ref) (Secret, error) {
	if err := ref.Validate(); err != nil {
		return Secret{}, fmt.Errorf("reading secret: %w", err)
	}
	sealed, ok, err := k.backend.GetSecret(ctx, ref.Scope, ref.Server, ref.Name)
	if err != nil {
		return Secret{}, fmt.Errorf("reading secret %s: %w", ref, err)
	}
	if !ok {
		return Secret{}, fmt.Errorf("reading secret %s: %w", ref, ErrNotFound)
	}
	plain, err := k.open(ref, sealed)
	if err != nil {
		return Secret{}, fmt.Errorf("reading secret %s: %w", ref, err)
	}
	return hold(plain), nil
}

// Delete removes the secret under ref; removing one that is not there is not an error.
func (k *Keystore) Delete(ctx context.Context, ref Ref) error {
	if err := ref.Validate(); err != nil {
		return fmt.Errorf("deleting secret: %w", err)
	}
	if err := k.backend.DeleteSecret(ctx, ref.Scope, ref.Server, ref.Name); err != nil {
		return fmt.Errorf("deleting secret %s: %w", ref, err)
	}
	return nil
}

// List returns the refs stored for one scope and server, sorted by name.
func (k *Keystore) List(ctx context.Context, scope, server string) ([]Ref, error) {
	if err := (Ref{Scope: scope, Server: server, Name: "-"}).Validate(); err != nil {
		return nil, fmt.Errorf("listing secrets: %w", err)
	}
	names, err := k.backend.ListSecrets(ctx, scope, server)
	if err != nil {
		return nil, fmt.Errorf("listing secrets of %s/%s: %w", scope, server, err)
	}
	slices.Sort(names)
	refs := make([]Ref, len(names))
	for i, n := range names {
		refs[i] = Ref{Scope: scope, Server: server, Name: n}
	}
	return refs, nil
}

// Named is one secret of a server by its name within the server.
type Named struct {
	Name  string
	Value Secret
}

// ReplaceServer makes the secrets stored for (scope, server) exactly secrets: it puts
// each one, then deletes every other name stored for that server (a secret the new
// definition no longer has). Puts come first, so a failure part way leaves at worst a
// stale extra secret, never a missing one; running it again completes it.
func (k *Keystore) ReplaceServer(ctx context.Context, scope, server string, secrets []Named) error {
	keep := make(map[string]bool, len(secrets))
	for _, s := range secrets {
		if err := k.Put(ctx, Ref{Scope: scope, Server: server, Name: s.Name}, s.Value); err != nil {
			return err
		}
		keep[s.Name] = true
	}
	return k.deleteExcept(ctx, scope, server, keep)
}

// DeleteServer removes every secret stored for (scope, server), as uninstalling does.
func (k *Keystore) DeleteServer(ctx context.Context, scope, server string) error {
	return k.deleteExcept(ctx, scope, server, nil)
}

func (k *Keystore) deleteExcept(ctx context.Context, scope, server string, keep map[string]bool) error {
	refs, err := k.List(ctx, scope, server)
	if err != nil {
		return err
	}
	for _, r := range refs {
		if !keep[r.Name] {
			if err := k.Delete(ctx, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// Server returns the secrets of one server as a source that resolves names within it,
// for the code that starts that server.
func (k *Keystore) Server(scope, server string) *ServerSecrets {
	return &ServerSecrets{k: k, scope: scope, server: server}
}

// ServerSecrets reads one server's secrets by name.
type ServerSecrets struct {
	k             *Keystore
	scope, server string
}

// Secret opens the server's secret called name.
func (s *ServerSecrets) Secret(ctx context.Context, name string) (Secret, error) {
	return s.k.Get(ctx, Ref{Scope: s.scope, Server: s.server, Name: name})
}

// Digest is the hex HMAC-SHA256 of a secret value under a key derived from the
// keystore's key. A definition's fingerprint includes secrets only through this digest,
// so a changed secret changes the fingerprint while the fingerprint, and the digest
// itself, reveal nothing about the value without the key file. The same value gives
// the same digest in one data directory and a different one in another.
func (k *Keystore) Digest(s Secret) string {
	m := hmac.New(sha256.New, k.digestKey)
	_ = s.Use(func(b []byte) error {
		m.Write(b)
		return nil
	})
	return hex.EncodeToString(m.Sum(nil))
}

// The sealed format, version 1:
//
//	keyID (1 byte, = 1) || nonce (12) || ciphertext || GCM tag (16)
//
// keyID names the master key and the format: key rotation would add ids, and a blob
// under an id this build does not hold is refused (ErrTampered), never guessed at.
const keyID byte = 1

// sealOverhead is how many bytes sealing adds to a value.
const sealOverhead = 1 + 12 + 16

// aad binds a ciphertext to its ref and key id. Each part is length-prefixed, so no two
// different refs give the same bytes.
func aad(ref Ref, id byte) []byte {
	b := make([]byte, 0, 32+len(ref.Scope)+len(ref.Server)+len(ref.Name))
	b = append(b, "toolgate/keystore/v1"...)
	b = append(b, 0, id)
	for _, p := range [...]string{ref.Scope, ref.Server, ref.Name} {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	return b
}

func (k *Keystore) seal(ref Ref, plain []byte) []byte {
	out := make([]byte, 1, len(plain)+sealOverhead)
	out[0] = keyID
	return k.aead.Seal(out, nil, plain, aad(ref, keyID))
}

func (k *Keystore) open(ref Ref, sealed []byte) ([]byte, error) {
	if len(sealed) < sealOverhead {
		return nil, fmt.Errorf("%w: %d bytes is shorter than any sealed value", ErrTampered, len(sealed))
	}
	if sealed[0] != keyID {
		return nil, fmt.Errorf("%w: sealed under key id %d, this keystore holds key id %d", ErrTampered, sealed[0], keyID)
	}
	plain, err := k.aead.Open(nil, nil, sealed[1:], aad(ref, sealed[0]))
	if err != nil {
		return nil, ErrTampered
	}
	return plain, nil
}
