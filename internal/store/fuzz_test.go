package store_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/toolgate/toolgate/internal/audit"
)

// FuzzAuditRoundTrip appends events with arbitrary strings and checks each comes back
// byte-exact with a verifying chain, or is refused with an error (never a panic, never
// a silently altered value).
func FuzzAuditRoundTrip(f *testing.F) {
	s := openTemp(f)
	ctx := context.Background()
	f.Add("alice", "files.read", "ok", "path")
	f.Add("\x00", "\xff\xfe", "line\nbreak", "")
	f.Add("' OR 1=1 --", "東京.✓", "\u202e", "k\x00")
	f.Fuzz(func(t *testing.T, principal, tool, message, argName string) {
		e := &audit.Event{Principal: principal, Tool: tool, Message: message, Decision: audit.Denied,
			Args: map[string]string{argName: "00"}}
		want := *e
		if err := s.AppendAudit(ctx, e); err != nil {
			if e.Seq != 0 {
				t.Fatalf("refused event got seq %d", e.Seq)
			}
			return
		}
		got, err := s.ListAudit(ctx, audit.Filter{AfterSeq: e.Seq - 1, Limit: 1})
		if err != nil || len(got) != 1 {
			t.Fatalf("reading back seq %d: %v (%d events)", e.Seq, err, len(got))
		}
		g := got[0]
		if g.Principal != want.Principal || g.Tool != want.Tool || g.Message != want.Message || !reflect.DeepEqual(g.Args, want.Args) {
			t.Fatalf("stored %+v, appended %+v", g, want)
		}
		if audit.ComputeHash(g.PrevHash, &g) != g.Hash {
			t.Fatalf("seq %d does not verify after the round trip", g.Seq)
		}
	})
}
