package toolpin_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/toolpin"
)

// FuzzParse: no definition panics Parse; an accepted one re-parses from its canonical
// form to the same digest (the pin is stable across restarts) and differs from itself
// in nothing.
func FuzzParse(f *testing.F) {
	for _, s := range []string{readFile, `{"name":"a","Description":"x"}`, `{"name":"a","_meta":{"x":[1.50]}}`, `{"name":""}`, `[]`, `{"name":"a\u200b","icons":[]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, err := toolpin.Parse("s", raw)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "server s") || !utf8.ValidString(err.Error()) {
				t.Fatalf("error %q does not name the server or is not UTF-8", err)
			}
			return
		}
		again, err := toolpin.Parse("s", d.Canonical)
		if err != nil || again.Digest != d.Digest || string(again.Canonical) != string(d.Canonical) {
			t.Fatalf("canonical form does not re-parse to the same pin: %v", err)
		}
		diff, err := toolpin.Compare(d.Canonical, again.Canonical)
		if err != nil || len(diff.Fields) != 0 {
			t.Fatalf("a definition differs from itself: %+v %v", diff, err)
		}
	})
}

// FuzzCompare: any two definitions diff without a panic, within the bounds.
func FuzzCompare(f *testing.F) {
	f.Add([]byte(readFile), []byte(strings.Replace(readFile, "complete", "whole", 1)))
	f.Add([]byte(`{"name":"a","description":"x\ny\nz"}`), []byte(`{"name":"a","description":"x\nq\nz","title":"t"}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		da, err1 := toolpin.Parse("s", a)
		db, err2 := toolpin.Parse("s", b)
		if err1 != nil || err2 != nil {
			return
		}
		d, err := toolpin.Compare(da.Canonical, db.Canonical)
		if err != nil {
			t.Fatal(err)
		}
		if (len(d.Fields) == 0) != (da.Digest == db.Digest) {
			t.Fatalf("%d changed members for digests %s / %s", len(d.Fields), da.Digest, db.Digest)
		}
		for _, fd := range d.Fields {
			if strings.Count(fd.Unified, "\n") > toolpin.MaxDiffLines+1 || len(fd.Paths) > toolpin.MaxDiffPaths {
				t.Fatalf("%s: unbounded diff", fd.Field)
			}
		}
		if s := d.String(); len(s) > toolpin.MaxDiffBytes+64 || !utf8.ValidString(s) {
			t.Fatalf("String() is %d bytes", len(s))
		}
	})
}
