package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/keystore"
	"github.com/toolgate/toolgate/internal/keystore/keystoretest"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/testenv"
)

var _ keystore.Backend = (*store.Store)(nil)

// TestSecretsBackend runs the keystore's backend suite against the secrets table.
func TestSecretsBackend(t *testing.T) {
	keystoretest.RunBackend(t, func(t *testing.T) keystore.Backend { return openTemp(t) })
}

func TestSecretsRefused(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	for name, ref := range map[string][3]string{
		"empty scope":    {"", "srv", "env.A"},
		"empty server":   {"user", "", "env.A"},
		"empty name":     {"user", "srv", ""},
		"NUL in name":    {"user", "srv", "env.\x00"},
		"newline":        {"user", "srv\n", "env.A"},
		"bad UTF-8":      {"user", "srv", "\xff"},
		"padded":         {" user", "srv", "env.A"},
		"oversized name": {"user", "srv", strings.Repeat("n", 257)},
	} {
		if err := s.PutSecret(ctx, ref[0], ref[1], ref[2], []byte{1}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("PutSecret(%s) = %v, want ErrInvalid", name, err)
		}
		if _, _, err := s.GetSecret(ctx, ref[0], ref[1], ref[2]); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("GetSecret(%s) = %v, want ErrInvalid", name, err)
		}
		if err := s.DeleteSecret(ctx, ref[0], ref[1], ref[2]); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("DeleteSecret(%s) = %v, want ErrInvalid", name, err)
		}
	}
	for name, blob := range map[string][]byte{"empty": nil, "oversized": make([]byte, 128<<10+1)} {
		if err := s.PutSecret(ctx, "user", "srv", "env.A", blob); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("PutSecret(%s blob) = %v, want ErrInvalid", name, err)
		}
	}
	if names, err := s.ListSecrets(ctx, "user", "srv"); err != nil || len(names) != 0 {
		t.Errorf("refused puts stored %q (%v)", names, err)
	}
}

// TestSecretsPersist: a blob written by one Store is read back, byte-exact, after the
// database is closed and reopened, and secrets do not move the policy version (an
// install must not make every process reload its grants).
func TestSecretsPersist(t *testing.T) {
	ctx := context.Background()
	dir := testenv.PrivateDir(t)
	s, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	before, err := s.PolicyVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutSecret(ctx, "user", "github", "env.TOKEN", []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSecret(ctx, "user", "github", "env.OTHER"); err != nil {
		t.Fatal(err)
	}
	if after, err := s.PolicyVersion(ctx); err != nil || after != before {
		t.Errorf("secrets moved the policy version %d -> %d (%v)", before, after, err)
	}
	s.Close()
	s, err = store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, ok, err := s.GetSecret(ctx, "user", "github", "env.TOKEN"); err != nil || !ok || string(got) != "\x01\x02\x03" {
		t.Errorf("after reopen GetSecret = %x, %v, %v", got, ok, err)
	}
}
