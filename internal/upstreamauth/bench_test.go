package upstreamauth_test

import (
	"context"
	"testing"

	"github.com/toolgate/toolgate/internal/upstreamauth"
	"github.com/toolgate/toolgate/internal/upstreamauth/upstreamauthtest"
)

// BenchmarkAuthorization is what every request to a signed-in server pays
// for its credential (no refresh due).
func BenchmarkAuthorization(b *testing.B) {
	w := newWorld(b, upstreamauthtest.Options{}, upstreamauth.Config{Headless: true})
	ctx := context.Background()
	if c, err := w.dial(ctx, w.s); err != nil {
		b.Fatal(err)
	} else {
		c.Close()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := w.s.Authorization(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
