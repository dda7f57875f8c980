package keystore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/keystore"
	"github.com/toolgate/toolgate/internal/keystore/keystoretest"
)

const canary = "tg-CANARY-9f3b7c1e-secret"

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	ks, mem := keystoretest.New(t)
	values := map[string][]byte{
		"env.EMPTY":            {},
		"env.TOKEN":            []byte(canary),
		"header.Authorization": []byte("Bearer " + canary),
		"arg.2":                {0, 0xff, 0x80, '\n', 0},
		"env.MAX":              bytes.Repeat([]byte{'m'}, keystore.MaxSecretBytes),
	}
	for name, v := range values {
		if err := ks.Put(ctx, keystore.Ref{Scope: "user", Server: "github", Name: name}, keystore.NewSecret(v)); err != nil {
			t.Fatalf("Put(%s): %v", name, err)
		}
	}
	for name, v := range values {
		ref := keystore.Ref{Scope: "user", Server: "github", Name: name}
		got, err := ks.Get(ctx, ref)
		if err != nil {
			t.Fatalf("Get(%s): %v", name, err)
		}
		if !bytes.Equal(got.Reveal(), v) || got.Len() != len(v) || !got.Equal(keystore.NewSecret(v)) {
			t.Errorf("Get(%s) does not give back the value put", name)
		}
		if blob := mem.Blob("user", "github", name); bytes.Contains(blob, []byte("CANARY")) || len(blob) != len(v)+29 {
			t.Errorf("%s: the backend holds %d bytes (want %d) or the clear value", name, len(blob), len(v)+29)
		}
	}
	// Two seals of one value differ (random nonce), and both open.
	ref := keystore.Ref{Scope: "user", Server: "github", Name: "env.TOKEN"}
	first := mem.Blob("user", "github", "env.TOKEN")
	if err := ks.Put(ctx, ref, keystore.NewSecretString(canary)); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(first, mem.Blob("user", "github", "env.TOKEN")) {
		t.Error("sealing one value twice gave the same bytes: the nonce is not fresh")
	}
	if err := ks.Put(ctx, ref, keystore.NewSecret(make([]byte, keystore.MaxSecretBytes+1))); !errors.Is(err, keystore.ErrInvalid) {
		t.Errorf("Put of an oversized value = %v, want ErrInvalid", err)
	}
	if s, err := ks.Get(ctx, ref); err != nil || s.RevealString() != canary {
		t.Errorf("a refused Put changed the stored value (%v)", err)
	}
	refs, err := ks.List(ctx, "user", "github")
	if err != nil || len(refs) != len(values) || refs[0].Name != "arg.2" || refs[0].Scope != "user" {
		t.Errorf("List = %v, %v", refs, err)
	}
	if err := ks.Delete(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Get(ctx, ref); !errors.Is(err, keystore.ErrNotFound) {
		t.Errorf("Get after Delete = %v, want ErrNotFound", err)
	}
	if err := ks.Delete(ctx, ref); err != nil {
		t.Errorf("deleting twice = %v, want nil", err)
	}
}

func TestReplaceAndDeleteServer(t *testing.T) {
	ctx := context.Background()
	ks, _ := keystoretest.New(t)
	put := func(scope, server string, names ...string) {
		var ns []keystore.Named
		for _, n := range names {
			ns = append(ns, keystore.Named{Name: n, Value: keystore.NewSecretString(n + "-value")})
		}
		if err := ks.ReplaceServer(ctx, scope, server, ns); err != nil {
			t.Fatal(err)
		}
	}
	names := func(scope, server string) []string {
		refs, err := ks.List(ctx, scope, server)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range refs {
			out = append(out, r.Name)
		}
		return out
	}
	put("user", "github", "env.A", "env.B", "header.X")
	put("user", "other", "env.A")
	put("user", "github", "env.B", "env.C")
	if got := names("user", "github"); !slices.Equal(got, []string{"env.B", "env.C"}) {
		t.Errorf("after ReplaceServer: %q, want env.B and env.C only", got)
	}
	if s, err := ks.Server("user", "github").Secret(ctx, "env.C"); err != nil || s.RevealString() != "env.C-value" {
		t.Errorf("ServerSecrets.Secret = %v", err)
	}
	if err := ks.DeleteServer(ctx, "user", "github"); err != nil {
		t.Fatal(err)
	}
	if got := names("user", "github"); len(got) != 0 {
		t.Errorf("after DeleteServer: %q", got)
	}
	if got := names("user", "other"); !slices.Equal(got, []string{"env.A"}) {
		t.Errorf("DeleteServer reached another server: %q", got)
	}
}

// TestTamper: a stored blob that was altered in any byte, truncated, moved to another
// ref or sealed under another key does not open, and the error says so without the
// value.
func TestTamper(t *testing.T) {
	ctx := context.Background()
	ks, mem := keystoretest.New(t)
	a := keystore.Ref{Scope: "workspace:ws_1", Server: "github", Name: "env.TOKEN"}
	if err := ks.Put(ctx, a, keystore.NewSecretString(canary)); err != nil {
		t.Fatal(err)
	}
	good := mem.Blob(a.Scope, a.Server, a.Name)
	refuse := func(what string, ref keystore.Ref) {
		t.Helper()
		s, err := ks.Get(ctx, ref)
		if !errors.Is(err, keystore.ErrTampered) {
			t.Errorf("%s: Get = %v, want ErrTampered", what, err)
		}
		if s.Len() != 0 || (err != nil && strings.Contains(err.Error(), "CANARY")) {
			t.Errorf("%s: a refused Get handed out or named the value", what)
		}
	}
	for i := range good {
		for _, bit := range []byte{0x01, 0x80} {
			bad := bytes.Clone(good)
			bad[i] ^= bit
			mem.Set(a.Scope, a.Server, a.Name, bad)
			refuse(fmt.Sprintf("byte %d ^ %#x", i, bit), a)
		}
	}
	for _, n := range []int{0, 1, 13, 28, len(good) - 1} {
		mem.Set(a.Scope, a.Server, a.Name, good[:n])
		refuse(fmt.Sprintf("truncated to %d bytes", n), a)
	}
	mem.Set(a.Scope, a.Server, a.Name, append(bytes.Clone(good), 0))
	refuse("one byte appended", a)
	// The same blob under any other ref: each part of the ref is bound.
	for _, other := range []keystore.Ref{
		{Scope: "user", Server: a.Server, Name: a.Name},
		{Scope: a.Scope, Server: "gitlab", Name: a.Name},
		{Scope: a.Scope, Server: a.Server, Name: "env.OTHER"},
		{Scope: a.Scope + "g", Server: "ithub", Name: a.Name}, // the same bytes split differently: the boundaries are bound too
		{Scope: a.Scope, Server: a.Server + "env.", Name: "TOKEN"},
	} {
		mem.Set(other.Scope, other.Server, other.Name, good)
		refuse("moved to "+other.String(), other)
	}
	// Two secrets swapped between refs: neither opens.
	b := keystore.Ref{Scope: a.Scope, Server: a.Server, Name: "header.Authorization"}
	if err := ks.Put(ctx, b, keystore.NewSecretString("Bearer "+canary)); err != nil {
		t.Fatal(err)
	}
	bb := mem.Blob(b.Scope, b.Server, b.Name)
	mem.Set(a.Scope, a.Server, a.Name, bb)
	mem.Set(b.Scope, b.Server, b.Name, good)
	refuse("swapped (a)", a)
	refuse("swapped (b)", b)
	// Sealed under another data directory's key, read through one shared backend.
	shared := &keystoretest.Mem{}
	k1, err := keystore.Open(t.TempDir(), shared)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := keystore.Open(t.TempDir(), shared)
	if err != nil {
		t.Fatal(err)
	}
	if err := k1.Put(ctx, a, keystore.NewSecretString(canary)); err != nil {
		t.Fatal(err)
	}
	if _, err := k2.Get(ctx, a); !errors.Is(err, keystore.ErrTampered) {
		t.Errorf("a blob sealed under another key opened: %v", err)
	}
	if s, err := k1.Get(ctx, a); err != nil || s.RevealString() != canary {
		t.Errorf("the sealing keystore cannot open its own blob: %v", err)
	}
}

func TestRefs(t *testing.T) {
	a := keystore.Ref{Scope: "user", Server: "github", Name: "env.TOKEN"}
	if id := a.ID(); !strings.HasPrefix(id, "sec_") || len(id) != 24 || id != a.ID() {
		t.Errorf("ID = %q, want a stable sec_ + 20 hex", id)
	}
	seen := map[string]keystore.Ref{}
	for _, r := range []keystore.Ref{a,
		{Scope: "user", Server: "github", Name: "env.TOKEN2"},
		{Scope: "user", Server: "githu", Name: "benv.TOKEN"},
		{Scope: "workspace:ws_1", Server: "github", Name: "env.TOKEN"},
	} {
		if prev, dup := seen[r.ID()]; dup {
			t.Errorf("%v and %v share id %s", prev, r, r.ID())
		}
		seen[r.ID()] = r
	}
	ctx := context.Background()
	ks, _ := keystoretest.New(t)
	for _, bad := range []keystore.Ref{
		{Server: "s", Name: "n"}, {Scope: "u", Name: "n"}, {Scope: "u", Server: "s"},
		{Scope: "u", Server: "s\x00", Name: "n"}, {Scope: "u", Server: "s", Name: "n\u0085"},
		{Scope: "u", Server: "s", Name: "\xff"}, {Scope: "u", Server: "s", Name: strings.Repeat("n", keystore.MaxRefPart+1)},
		{Scope: "u ", Server: "s", Name: "n"},
	} {
		if err := ks.Put(ctx, bad, keystore.NewSecretString("v")); !errors.Is(err, keystore.ErrInvalid) {
			t.Errorf("Put(%q) = %v, want ErrInvalid", bad, err)
		}
		if _, err := ks.Get(ctx, bad); !errors.Is(err, keystore.ErrInvalid) {
			t.Errorf("Get(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestDigest(t *testing.T) {
	ks, _ := keystoretest.New(t)
	other, _ := keystoretest.New(t)
	d := ks.Digest(keystore.NewSecretString(canary))
	if len(d) != 64 || d != ks.Digest(keystore.NewSecretString(canary)) {
		t.Errorf("Digest = %q: want 64 hex digits, stable", d)
	}
	if d == ks.Digest(keystore.NewSecretString(canary+"x")) || d == ks.Digest(keystore.Secret{}) {
		t.Error("different values share a digest")
	}
	if d == other.Digest(keystore.NewSecretString(canary)) {
		t.Error("two data directories give one value the same digest: the digest is not keyed by the keystore")
	}
	// The digest is the HMAC under a derived key, not a plain hash of the value.
	if strings.Contains(d, fmt.Sprintf("%x", canary)[:16]) {
		t.Error("digest contains the value's hex")
	}
}

// TestConcurrentUse: one keystore used from many goroutines at once (run with -race).
func TestConcurrentUse(t *testing.T) {
	ctx := context.Background()
	ks, _ := keystoretest.New(t)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 50 {
				ref := keystore.Ref{Scope: "user", Server: fmt.Sprintf("s%d", w%3), Name: fmt.Sprintf("env.V%d", i%7)}
				v := keystore.NewSecretString(fmt.Sprintf("%s-%d-%d", canary, w, i))
				if err := ks.Put(ctx, ref, v); err != nil {
					t.Error(err)
					return
				}
				if _, err := ks.Get(ctx, ref); err != nil {
					t.Error(err) // another writer may have replaced it, but it always opens
					return
				}
				_ = ks.Digest(v)
				if _, err := ks.List(ctx, ref.Scope, ref.Server); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
}
