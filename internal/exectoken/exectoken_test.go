package exectoken_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/exectoken"
)

var (
	key   = []byte("0123456789abcdef0123456789abcdef")
	other = []byte("fedcba9876543210fedcba9876543210")
	t0    = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
)

func mint(t *testing.T, c exectoken.Claims) string {
	t.Helper()
	tok, err := exectoken.Mint(key, c)
	if err != nil {
		t.Fatalf("Mint: %v", err)
	}
	return tok
}

func TestRoundTrip(t *testing.T) {
	in := exectoken.Claims{Principal: "agent-ü/1", Session: "s_42", IssuedAt: t0, Expires: t0.Add(time.Hour)}
	tok := mint(t, in)
	if !strings.HasPrefix(tok, exectoken.Prefix) || strings.Count(tok, ".") != 2 {
		t.Fatalf("token %q is not tgx1.<claims>.<mac>", tok)
	}
	got, err := exectoken.Verify(key, tok, t0.Add(30*time.Minute))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if got.Principal != in.Principal || got.Session != in.Session || !got.IssuedAt.Equal(in.IssuedAt) || !got.Expires.Equal(in.Expires) {
		t.Errorf("claims = %+v, want %+v", got, in)
	}
}

func TestExpiry(t *testing.T) {
	tok := mint(t, exectoken.Claims{Principal: "p", IssuedAt: t0, Expires: t0.Add(time.Minute)})
	if _, err := exectoken.Verify(key, tok, t0.Add(time.Minute-time.Second)); err != nil {
		t.Errorf("one second before expiry: %v", err)
	}
	for _, at := range []time.Duration{time.Minute, time.Hour} {
		_, err := exectoken.Verify(key, tok, t0.Add(at))
		if !errors.Is(err, exectoken.ErrExpired) || !errors.Is(err, exectoken.ErrInvalid) {
			t.Errorf("at +%v: err = %v, want ErrExpired", at, err)
		}
	}
	// Issued beyond the allowed clock skew: refused as not yet valid.
	if _, err := exectoken.Verify(key, tok, t0.Add(-2*exectoken.ClockSkew)); !errors.Is(err, exectoken.ErrNotYet) {
		t.Errorf("before issue: err = %v, want ErrNotYet", err)
	}
}

func TestMintRefuses(t *testing.T) {
	cases := map[string]struct {
		key []byte
		c   exectoken.Claims
	}{
		"short key":        {[]byte("short"), exectoken.Claims{Principal: "p", IssuedAt: t0, Expires: t0.Add(time.Hour)}},
		"empty principal":  {key, exectoken.Claims{IssuedAt: t0, Expires: t0.Add(time.Hour)}},
		"no lifetime":      {key, exectoken.Claims{Principal: "p", IssuedAt: t0, Expires: t0}},
		"NUL in principal": {key, exectoken.Claims{Principal: "a\x00b", IssuedAt: t0, Expires: t0.Add(time.Hour)}},
		"newline session":  {key, exectoken.Claims{Principal: "p", Session: "a\nb", IssuedAt: t0, Expires: t0.Add(time.Hour)}},
		"bad UTF-8":        {key, exectoken.Claims{Principal: "\xff", IssuedAt: t0, Expires: t0.Add(time.Hour)}},
		"huge principal":   {key, exectoken.Claims{Principal: strings.Repeat("x", 5000), IssuedAt: t0, Expires: t0.Add(time.Hour)}},
	}
	for name, tc := range cases {
		if tok, err := exectoken.Mint(tc.key, tc.c); err == nil {
			t.Errorf("%s: Mint = %q, want an error", name, tok)
		}
	}
}

func TestRejects(t *testing.T) {
	tok := mint(t, exectoken.Claims{Principal: "alice", Session: "s", IssuedAt: t0, Expires: t0.Add(time.Hour)})
	parts := strings.Split(tok, ".")
	claims, _ := base64.RawURLEncoding.DecodeString(parts[1])
	forgedClaims := strings.Replace(string(claims), `"alice"`, `"admin"`, 1)
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(forgedClaims)) + "." + parts[2]
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	sig[0] ^= 1
	flippedSig := parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(sig)
	// A correctly signed token whose claims are not what Mint writes.
	resigned := func(body string) string {
		forged, err := signRaw(key, body)
		if err != nil {
			t.Fatal(err)
		}
		return forged
	}

	cases := []struct {
		name string
		key  []byte
		tok  string
		want error
	}{
		{"tampered payload", key, tampered, exectoken.ErrForged},
		{"flipped signature bit", key, flippedSig, exectoken.ErrForged},
		{"wrong key", other, tok, exectoken.ErrForged},
		{"truncated signature", key, tok[:len(tok)-3], exectoken.ErrMalformed},
		{"truncated to claims", key, parts[0] + "." + parts[1], exectoken.ErrMalformed},
		{"prefix only", key, "tgx1.", exectoken.ErrMalformed},
		{"empty", key, "", exectoken.ErrMalformed},
		{"garbage", key, "not a token at all", exectoken.ErrMalformed},
		{"other version", key, "tgx2." + parts[1] + "." + parts[2], exectoken.ErrMalformed},
		{"extra part", key, tok + ".x", exectoken.ErrMalformed},
		{"huge", key, exectoken.Prefix + strings.Repeat("A", 1<<20), exectoken.ErrMalformed},
		{"signed non-JSON", key, resigned("hello"), exectoken.ErrMalformed},
		{"signed unknown field", key, resigned(`{"p":"a","s":"","iat":1,"exp":2,"admin":true}`), exectoken.ErrMalformed},
		{"signed no principal", key, resigned(`{"p":"","s":"","iat":1,"exp":2}`), exectoken.ErrMalformed},
		{"signed trailing data", key, resigned(`{"p":"a","s":"","iat":1,"exp":9999999999}{}`), exectoken.ErrMalformed},
	}
	for _, tc := range cases {
		c, err := exectoken.Verify(tc.key, tc.tok, t0)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Verify = %+v, %v; want %v", tc.name, c, err, tc.want)
		}
		if err != nil && c != (exectoken.Claims{}) {
			t.Errorf("%s: claims returned with an error: %+v", tc.name, c)
		}
	}
	if _, err := exectoken.Verify([]byte("short"), tok, t0); err == nil {
		t.Error("Verify with a short key succeeded")
	}
}

// signRaw signs an arbitrary claims body with k exactly as Mint signs its own, to reach
// the checks that run only after the signature is accepted.
func signRaw(k []byte, body string) (string, error) {
	signed := exectoken.Prefix + base64.RawURLEncoding.EncodeToString([]byte(body))
	m := hmac.New(sha256.New, k)
	m.Write([]byte(signed))
	return signed + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil)), nil
}

func FuzzVerify(f *testing.F) {
	tok, err := exectoken.Mint(key, exectoken.Claims{Principal: "p", Session: "s", IssuedAt: t0, Expires: t0.Add(time.Hour)})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{tok, "", "tgx1.", "tgx1..", "tgx1.e30.", tok[:len(tok)-1], tok + "=", "tgx1.\x00.\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := exectoken.Verify(key, s, t0)
		if err != nil {
			if !errors.Is(err, exectoken.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		// Anything accepted must be exactly what Mint would have produced for these claims.
		again, err := exectoken.Mint(key, c)
		if err != nil {
			t.Fatalf("accepted claims %+v cannot be re-minted: %v", c, err)
		}
		if again != s {
			t.Fatalf("accepted %q, but its claims mint %q", s, again)
		}
	})
}

func BenchmarkVerify(b *testing.B) {
	tok, err := exectoken.Mint(key, exectoken.Claims{Principal: "agent", Session: "s_0123456789", IssuedAt: t0, Expires: t0.Add(time.Hour)})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := exectoken.Verify(key, tok, t0); err != nil {
			b.Fatal(err)
		}
	}
}
