package keystore_test

import (
	"context"
	"testing"

	"github.com/toolgate/toolgate/internal/keystore"
	"github.com/toolgate/toolgate/internal/keystore/keystoretest"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/testenv"
)

// BenchmarkGet opens one 40-byte secret (a token), over the map backend (the cost of
// the keystore itself: one AES-GCM open) and over the real store (one SQLite read).
func BenchmarkGet(b *testing.B) {
	ctx := context.Background()
	mem, _ := keystoretest.New(b)
	st, err := store.Open(ctx, testenv.PrivateDir(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	onStore, err := keystore.Open(b.TempDir(), st)
	if err != nil {
		b.Fatal(err)
	}
	ref := keystore.Ref{Scope: "user", Server: "github", Name: "env.GITHUB_TOKEN"}
	for _, c := range []struct {
		name string
		ks   *keystore.Keystore
	}{{"mem", mem}, {"store", onStore}} {
		if err := c.ks.Put(ctx, ref, keystore.NewSecretString("ghp_0123456789abcdefghij0123456789abcdef")); err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.ks.Get(ctx, ref); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
