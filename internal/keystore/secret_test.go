package keystore_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/keystore"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/testenv"
)

// holder has the shapes a Secret travels in: an exported field, an unexported one, a
// pointer, a slice and a map value.
type holder struct {
	Name    string
	Token   keystore.Secret
	hidden  keystore.Secret
	Ptr     *keystore.Secret
	List    []keystore.Secret
	ByName  map[string]keystore.Secret
	private struct{ s keystore.Secret }
}

func newHolder() holder {
	s := keystore.NewSecretString(canary)
	h := holder{Name: "github", Token: s, hidden: s, Ptr: &s, List: []keystore.Secret{s}, ByName: map[string]keystore.Secret{"TOKEN": s}}
	h.private.s = s
	return h
}

// TestSecretNeverPrinted: no formatting, encoding or logging path prints the value.
func TestSecretNeverPrinted(t *testing.T) {
	s := keystore.NewSecretString(canary)
	h := newHolder()
	var outs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10.3s", "%T", "%p"} {
		outs = append(outs, fmt.Sprintf(verb, s), fmt.Sprintf(verb, &s), fmt.Sprintf(verb, h), fmt.Sprintf(verb, &h))
	}
	outs = append(outs, fmt.Sprint(s, h), fmt.Sprintln(s, h), s.String(), s.GoString())
	outs = append(outs, fmt.Errorf("starting server: token %v: %w", s, errors.New("boom")).Error())
	for _, v := range []any{s, &s, h, &h, map[string]any{"s": s}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("json.Marshal(%T): %v", v, err)
		}
		outs = append(outs, string(b))
		b, _ = json.MarshalIndent(v, "", " ")
		outs = append(outs, string(b))
	}
	if b, err := xml.Marshal(struct{ S keystore.Secret }{s}); err == nil {
		outs = append(outs, string(b))
	}
	if b, err := s.MarshalText(); err != nil || string(b) != keystore.Redacted {
		t.Errorf("MarshalText = %q, %v", b, err)
	}
	// Loggers: slog text and JSON handlers, with the secret as an attribute, inside a
	// struct and a group, and the standard log package.
	var buf bytes.Buffer
	for _, lg := range []*slog.Logger{slog.New(slog.NewTextHandler(&buf, nil)), slog.New(slog.NewJSONHandler(&buf, nil))} {
		lg.Info("starting", "token", s, "holder", h, "ptr", &s)
		lg.With("token", s).WithGroup("g").Error("failed", slog.Any("h", &h), slog.String("n", s.String()))
		lg.LogAttrs(context.Background(), slog.LevelWarn, "attrs", slog.Any("token", s))
	}
	std := log.New(&buf, "", 0)
	std.Printf("token=%v holder=%+v", s, h)
	outs = append(outs, buf.String())
	for _, o := range outs {
		if leaked(o, canary) {
			t.Errorf("the value escaped: %s", o)
		}
	}
	if !strings.Contains(buf.String(), keystore.Redacted) {
		t.Error("the logs do not show [redacted] at all: the capture is not working")
	}
	// A control: the capture does see a value that is not wrapped.
	var ctl bytes.Buffer
	slog.New(slog.NewTextHandler(&ctl, nil)).Info("x", "v", s.RevealString())
	if !strings.Contains(ctl.String(), "CANARY") {
		t.Fatal("control: a clear value did not reach the captured log")
	}
}

// leaked reports whether out shows value in any form fmt, encoding/json or a logger
// could print bytes in: as text, hex (either case), decimal byte lists, or base64.
func leaked(out, value string) bool {
	mid := value[len(value)/4 : len(value)/4+8] // a stretch in the middle: no form may show even that
	dec := strings.Trim(fmt.Sprint([]byte(mid)), "[]")
	for _, form := range []string{mid, fmt.Sprintf("%x", mid), fmt.Sprintf("%X", mid), dec, strings.ReplaceAll(dec, " ", ","),
		base64.StdEncoding.EncodeToString([]byte(value))[4:16]} {
		if strings.Contains(out, form) {
			return true
		}
	}
	return false
}

func TestSecretDecodeRefused(t *testing.T) {
	var got struct{ S keystore.Secret }
	if err := json.Unmarshal([]byte(`{"S":"[redacted]"}`), &got); err == nil {
		t.Error("a Secret decoded from JSON: a redacted value read back would replace the real one")
	}
	var s keystore.Secret
	if err := s.UnmarshalText([]byte("x")); err == nil {
		t.Error("UnmarshalText accepted a value")
	}
}

func TestSecretAccessors(t *testing.T) {
	src := []byte(canary)
	s := keystore.NewSecret(src)
	src[0] = 'X'
	if s.RevealString() != canary {
		t.Error("NewSecret did not copy its input")
	}
	r := s.Reveal()
	r[0] = 'X'
	if s.RevealString() != canary {
		t.Error("Reveal handed out the Secret's own bytes")
	}
	var seen []byte
	if err := s.Use(func(b []byte) error { seen = b; return nil }); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(seen, make([]byte, len(canary))) {
		t.Error("Use did not wipe its copy after the callback")
	}
	if s.RevealString() != canary {
		t.Error("Use wiped the Secret itself")
	}
	var zero keystore.Secret
	if zero.Len() != 0 || zero.Reveal() != nil || zero.RevealString() != "" || !zero.Equal(keystore.NewSecret(nil)) || zero.String() != keystore.Redacted {
		t.Error("the zero Secret is not an empty, redacted value")
	}
	if s.Equal(keystore.NewSecretString(canary+"!")) || !s.Equal(keystore.NewSecretString(canary)) {
		t.Error("Equal is wrong")
	}
}

// TestNoClearSecretOnDisk stores a canary through the real store and scans every file
// of the data directory, the database, its WAL and shared-memory file, both while the
// store is open (the WAL holds the fresh pages) and after it closed. The key file holds
// no secret, and its bytes are not in the database either.
func TestNoClearSecretOnDisk(t *testing.T) {
	ctx := context.Background()
	dir := testenv.PrivateDir(t)
	st, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := keystore.Open(dir, st)
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"env.GITHUB_TOKEN", "header.Authorization", "arg.3"} {
		v := fmt.Sprintf("%s-%d", canary, i)
		if err := ks.Put(ctx, keystore.Ref{Scope: "user", Server: "github", Name: name}, keystore.NewSecretString(v)); err != nil {
			t.Fatal(err)
		}
	}
	if s, err := ks.Get(ctx, keystore.Ref{Scope: "user", Server: "github", Name: "arg.3"}); err != nil || s.RevealString() != canary+"-2" {
		t.Fatalf("reading back through the store: %v", err)
	}
	key, err := os.ReadFile(ks.KeyPath())
	if err != nil {
		t.Fatal(err)
	}
	// A control, in another row: the scan must see a value written in clear.
	if err := st.SetMeta(ctx, "control", "clear-MARKER-visible"); err != nil {
		t.Fatal(err)
	}
	scan := func(when string) {
		t.Helper()
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		sawControl, sawWAL := false, false
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(e.Name(), "-wal") && len(b) > 0 {
				sawWAL = true
			}
			if bytes.Contains(b, []byte("CANARY")) {
				t.Errorf("%s: %s holds a secret in clear", when, e.Name())
			}
			if e.Name() != keystore.KeyFile && bytes.Contains(b, key) {
				t.Errorf("%s: %s holds the keystore key", when, e.Name())
			}
			sawControl = sawControl || bytes.Contains(b, []byte("clear-MARKER-visible"))
		}
		if !sawControl {
			t.Errorf("%s: control: the clear meta value was not found, so the scan proves nothing", when)
		}
		if when == "open" && !sawWAL {
			t.Errorf("open: no WAL content to scan")
		}
	}
	scan("open")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	scan("closed")
}
