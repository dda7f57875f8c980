package store_test

import (
	"context"
	"testing"

	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/testenv"
)

func TestParseDurability(t *testing.T) {
	for in, want := range map[string]store.Durability{"": store.DurabilityProcess, "process": store.DurabilityProcess, "power": store.DurabilityPower} {
		if got, err := store.ParseDurability(in); err != nil || got != want {
			t.Errorf("ParseDurability(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"Power", "fsync", "full", " process", "process\x00"} {
		if _, err := store.ParseDurability(bad); err == nil {
			t.Errorf("ParseDurability(%q) accepted", bad)
		}
	}
}

// Each level reaches every pooled connection, not only the first: the audit writer
// and the readers use different ones.
func TestDurabilityReachesTheDatabase(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		open    func(t *testing.T, o ...store.Option) *store.Store
		setting string
		want    map[store.Durability]string
	}{
		{"sqlite", func(t *testing.T, o ...store.Option) *store.Store {
			s, err := store.Open(ctx, testenv.PrivateDir(t), o...)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}, "synchronous", map[store.Durability]string{store.DurabilityProcess: "1", store.DurabilityPower: "2"}},
		{"postgres", func(t *testing.T, o ...store.Option) *store.Store {
			s, err := store.OpenPostgres(ctx, testenv.Postgres(t), o...)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}, "synchronous_commit", map[store.Durability]string{store.DurabilityProcess: "off", store.DurabilityPower: "on"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, d := range []store.Durability{"", store.DurabilityProcess, store.DurabilityPower} {
				s := c.open(t, store.WithDurability(d))
				want := d
				if want == "" {
					want = store.DefaultDurability
				}
				if s.Durability() != want {
					t.Errorf("%q: Durability() = %q", d, s.Durability())
				}
				// Hold several connections at once so the pool opens more than one.
				conns := make(chan struct{})
				errs := make(chan error, 4)
				for range 4 {
					go func() {
						v, err := store.SessionSetting(s, c.setting)
						if err == nil && v != c.want[want] {
							err = &mismatch{c.setting, v, c.want[want]}
						}
						errs <- err
						<-conns
					}()
				}
				for range 4 {
					if err := <-errs; err != nil {
						t.Errorf("%q: %v", d, err)
					}
				}
				close(conns)
				s.Close()
			}
		})
	}
}

type mismatch struct{ name, got, want string }

func (m *mismatch) Error() string { return m.name + " = " + m.got + ", want " + m.want }
