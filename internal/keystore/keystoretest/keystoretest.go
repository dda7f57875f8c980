// Package keystoretest holds a map-backed keystore.Backend for tests of code that uses
// the keystore, and RunBackend, the behavioural suite every Backend must pass (the
// store's secrets table runs it in internal/store).
package keystoretest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/keystore"
)

// Mem is an in-memory keystore.Backend. The zero value is ready to use.
type Mem struct {
	mu    sync.Mutex
	blobs map[[3]string][]byte
}

var _ keystore.Backend = (*Mem)(nil)

// PutSecret implements keystore.Backend.
func (m *Mem) PutSecret(_ context.Context, scope, server, name string, sealed []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.blobs == nil {
		m.blobs = map[[3]string][]byte{}
	}
	m.blobs[[3]string{scope, server, name}] = bytes.Clone(sealed)
	return nil
}

// GetSecret implements keystore.Backend.
func (m *Mem) GetSecret(_ context.Context, scope, server, name string) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.blobs[[3]string{scope, server, name}]
	return bytes.Clone(b), ok, nil
}

// DeleteSecret implements keystore.Backend.
func (m *Mem) DeleteSecret(_ context.Context, scope, server, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.blobs, [3]string{scope, server, name})
	return nil
}

// ListSecrets implements keystore.Backend.
func (m *Mem) ListSecrets(_ context.Context, scope, server string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := []string{}
	for k := range m.blobs {
		if k[0] == scope && k[1] == server {
			names = append(names, k[2])
		}
	}
	slices.Sort(names)
	return names, nil
}

// Set overwrites a stored blob directly, for tamper tests.
func (m *Mem) Set(scope, server, name string, sealed []byte) {
	_ = m.PutSecret(context.Background(), scope, server, name, sealed)
}

// Blob returns a stored blob, for tamper tests.
func (m *Mem) Blob(scope, server, name string) []byte {
	b, _, _ := m.GetSecret(context.Background(), scope, server, name)
	return b
}

// New opens a keystore over a fresh Mem in a temporary data directory.
func New(t testing.TB) (*keystore.Keystore, *Mem) {
	t.Helper()
	m := &Mem{}
	ks, err := keystore.Open(t.TempDir(), m)
	if err != nil {
		t.Fatalf("opening keystore: %v", err)
	}
	return ks, m
}

// RunBackend runs the behavioural suite against backends open returns (each call a
// fresh, empty one).
func RunBackend(t *testing.T, open func(t *testing.T) keystore.Backend) {
	t.Run("RoundTrip", func(t *testing.T) { testRoundTrip(t, open(t)) })
	t.Run("Isolation", func(t *testing.T) { testIsolation(t, open(t)) })
	t.Run("Hostile", func(t *testing.T) { testHostile(t, open(t)) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, open(t)) })
}

func testRoundTrip(t *testing.T, b keystore.Backend) {
	ctx := context.Background()
	if got, ok, err := b.GetSecret(ctx, "user", "github", "env.TOKEN"); err != nil || ok || got != nil {
		t.Errorf("GetSecret of nothing = %x, %v, %v; want nil, false, nil", got, ok, err)
	}
	if names, err := b.ListSecrets(ctx, "user", "github"); err != nil || len(names) != 0 {
		t.Errorf("ListSecrets of nothing = %q, %v", names, err)
	}
	if err := b.DeleteSecret(ctx, "user", "github", "env.TOKEN"); err != nil {
		t.Errorf("DeleteSecret of nothing = %v, want nil", err)
	}
	blob := []byte{1, 0, 0xff, 0x00, 0x80, 'x', 0}
	if err := b.PutSecret(ctx, "user", "github", "env.TOKEN", blob); err != nil {
		t.Fatalf("PutSecret: %v", err)
	}
	blob[2] = 0 // the backend must have kept its own copy
	got, ok, err := b.GetSecret(ctx, "user", "github", "env.TOKEN")
	if err != nil || !ok || !bytes.Equal(got, []byte{1, 0, 0xff, 0x00, 0x80, 'x', 0}) {
		t.Fatalf("GetSecret = %x, %v, %v; want the stored bytes exactly", got, ok, err)
	}
	if err := b.PutSecret(ctx, "user", "github", "env.TOKEN", []byte("replaced")); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := b.GetSecret(ctx, "user", "github", "env.TOKEN"); string(got) != "replaced" {
		t.Errorf("after a second PutSecret, GetSecret = %q, want the new blob", got)
	}
	for _, n := range []string{"header.Authorization", "arg.3", "env.A"} {
		if err := b.PutSecret(ctx, "user", "github", n, []byte(n)); err != nil {
			t.Fatal(err)
		}
	}
	names, err := b.ListSecrets(ctx, "user", "github")
	if err != nil || !slices.Equal(names, []string{"arg.3", "env.A", "env.TOKEN", "header.Authorization"}) {
		t.Errorf("ListSecrets = %q, %v; want four names sorted", names, err)
	}
	if err := b.DeleteSecret(ctx, "user", "github", "env.TOKEN"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := b.GetSecret(ctx, "user", "github", "env.TOKEN"); ok {
		t.Error("a deleted secret is still there")
	}
	if names, _ := b.ListSecrets(ctx, "user", "github"); len(names) != 3 {
		t.Errorf("after delete, ListSecrets = %q", names)
	}
}

// testIsolation: scope, server and name each separate secrets; no prefix or pattern
// matching crosses them.
func testIsolation(t *testing.T, b keystore.Backend) {
	ctx := context.Background()
	refs := [][3]string{
		{"user", "github", "env.T"},
		{"workspace:ws_1", "github", "env.T"},
		{"user", "github2", "env.T"},
		{"user", "git", "hub.env.T"},
		{"user", "github", "env.T2"},
		{"user", "%", "env.T"},
		{"user", "_", "env.T"},
	}
	for i, r := range refs {
		if err := b.PutSecret(ctx, r[0], r[1], r[2], []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range refs {
		got, ok, err := b.GetSecret(ctx, r[0], r[1], r[2])
		if err != nil || !ok || !bytes.Equal(got, []byte{byte(i)}) {
			t.Errorf("GetSecret(%q) = %x, %v, %v; want %x", r, got, ok, err, []byte{byte(i)})
		}
	}
	for _, c := range []struct {
		scope, server string
		want          []string
	}{
		{"user", "github", []string{"env.T", "env.T2"}},
		{"workspace:ws_1", "github", []string{"env.T"}},
		{"user", "git", []string{"hub.env.T"}},
		{"user", "%", []string{"env.T"}},
		{"user", "g%", []string{}},
		{"USER", "github", []string{}},
	} {
		if got, err := b.ListSecrets(ctx, c.scope, c.server); err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ListSecrets(%q, %q) = %q, %v; want %q", c.scope, c.server, got, err, c.want)
		}
	}
	if err := b.DeleteSecret(ctx, "user", "github", "env.T"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := b.GetSecret(ctx, "workspace:ws_1", "github", "env.T"); !ok {
		t.Error("deleting a user-scope secret removed the workspace-scope one")
	}
}

// testHostile: names full of SQL, unicode and quoting round-trip as plain data; a
// large blob is kept whole.
func testHostile(t *testing.T, b keystore.Backend) {
	ctx := context.Background()
	names := []string{"' OR 1=1 --", "东京 ✓", `"quoted"`, "semi;colon", strings.Repeat("n", keystore.MaxRefPart)}
	big := bytes.Repeat([]byte{0xa5}, keystore.MaxSealedBytes-1)
	for i, n := range names {
		if err := b.PutSecret(ctx, "user", "s", n, append([]byte{byte(i)}, big...)); err != nil {
			t.Fatalf("PutSecret(%.20q): %v", n, err)
		}
	}
	for i, n := range names {
		got, ok, err := b.GetSecret(ctx, "user", "s", n)
		if err != nil || !ok || !bytes.Equal(got, append([]byte{byte(i)}, big...)) {
			t.Errorf("GetSecret(%.20q): %d bytes, %v, %v", n, len(got), ok, err)
		}
	}
	got, err := b.ListSecrets(ctx, "user", "s")
	if err != nil || len(got) != len(names) {
		t.Errorf("ListSecrets = %d names, %v; want %d", len(got), err, len(names))
	}
}

func testConcurrent(t *testing.T, b keystore.Backend) {
	ctx := context.Background()
	var wg sync.WaitGroup
	const workers, each = 8, 20
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				name := fmt.Sprintf("env.W%d_%d", w, i)
				if err := b.PutSecret(ctx, "user", "srv", name, []byte(name)); err != nil {
					t.Error(err)
					return
				}
				got, ok, err := b.GetSecret(ctx, "user", "srv", name)
				if err != nil || !ok || string(got) != name {
					t.Errorf("GetSecret(%s) = %q, %v, %v", name, got, ok, err)
				}
				if i%2 == 0 {
					if err := b.DeleteSecret(ctx, "user", "srv", name); err != nil {
						t.Error(err)
					}
				}
				if _, err := b.ListSecrets(ctx, "user", "srv"); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if names, err := b.ListSecrets(ctx, "user", "srv"); err != nil || len(names) != workers*each/2 {
		t.Errorf("after concurrent writes: %d names, %v; want %d", len(names), err, workers*each/2)
	}
}
