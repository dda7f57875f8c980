package store

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// pgAuditText must be one-to-one and give PostgreSQL TEXT only valid UTF-8 without
// NUL: two different audit strings never become one stored value, and every stored
// value reads back as the string that was appended.
func FuzzPGAuditText(f *testing.F) {
	for _, s := range []string{"", "alice", "\x00", "\xff\xfe", `\x`, `\x41`, `\x4`, `\xzz`, "東京 ✓", "a\x00b"} {
		f.Add(s, s+"!")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ea, eb := pgAuditText(a), pgAuditText(b)
		if !utf8.ValidString(ea) || strings.ContainsRune(ea, 0) {
			t.Fatalf("pgAuditText(%q) = %q: not storable as TEXT", a, ea)
		}
		if got, err := pgAuditFromDB(ea); err != nil || got != a {
			t.Fatalf("round trip of %q: %q, %v", a, got, err)
		}
		if a != b && ea == eb {
			t.Fatalf("%q and %q are both stored as %q", a, b, ea)
		}
	})
}

func TestPGAuditTextLeavesPlainStringsReadable(t *testing.T) {
	for _, s := range []string{"alice", "files.read", "path:docs/a.md", "東京 ✓ \u202e", "line\nbreak", `C:\x`} {
		if got := pgAuditText(s); got != s {
			t.Errorf("pgAuditText(%q) = %q, want it unchanged", s, got)
		}
	}
	for s, want := range map[string]string{"a\x00b": `\x610062`, "\xff": `\xff`, `\x41`: `\x5c783431`} {
		if got := pgAuditText(s); got != want {
			t.Errorf("pgAuditText(%q) = %q, want %q", s, got, want)
		}
	}
	if _, err := pgAuditFromDB(`\xzz`); err == nil {
		t.Error("a corrupt escaped value was accepted")
	}
}

// docs/storage.md names the advisory lock keys, for operators reading pg_locks.
func TestStorageDocNamesTheLockKeys(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "storage.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name, key := range map[string]int64{"audit": auditLockKey, "migration": migrateLockKey} {
		if !strings.Contains(string(doc), strconv.FormatInt(key, 10)) {
			t.Errorf("docs/storage.md does not name the %s lock key %d", name, key)
		}
	}
}
