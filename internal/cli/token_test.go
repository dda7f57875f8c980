package cli_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/exectoken"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/testenv"
)

func tokenKey(t *testing.T, dir string) []byte {
	t.Helper()
	s, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	k, err := s.Key(context.Background(), "token")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestTokenMint(t *testing.T) {
	dir := testenv.PrivateDir(t)
	r := runStoreCLI(t, dir, "token", "mint")
	if r.code != 0 || r.errOut != "" {
		t.Fatalf("token mint: %d %q", r.code, r.errOut)
	}
	if strings.Count(r.out, "\n") != 1 || !strings.HasSuffix(r.out, "\n") {
		t.Fatalf("token mint printed %q, want exactly one line", r.out)
	}
	key := tokenKey(t, dir)
	c, err := exectoken.Verify(key, strings.TrimSpace(r.out), time.Now())
	if err != nil {
		t.Fatalf("minted token does not verify with the store's token key: %v", err)
	}
	if c.Principal != "default" || !strings.HasPrefix(c.Session, "s_") {
		t.Errorf("claims %+v: want principal default and a random session", c)
	}
	if d := time.Until(c.Expires); d <= 58*time.Minute || d > time.Hour+time.Second {
		t.Errorf("default ttl gives expiry in %s, want about 1h", d)
	}

	r = runStoreCLI(t, dir, "token", "mint", "--principal", "ci-agent", "--ttl", "15m", "--session", "run-7")
	c, err = exectoken.Verify(key, strings.TrimSpace(r.out), time.Now())
	if err != nil || c.Principal != "ci-agent" || c.Session != "run-7" {
		t.Fatalf("claims %+v, %v", c, err)
	}
	if d := time.Until(c.Expires); d <= 14*time.Minute || d > 15*time.Minute+time.Second {
		t.Errorf("--ttl 15m gives expiry in %s", d)
	}
	// Two mints differ (random session) and both verify.
	a, b := runStoreCLI(t, dir, "token", "mint"), runStoreCLI(t, dir, "token", "mint")
	if a.out == b.out {
		t.Error("two mints printed the same token")
	}

	// A token from another data directory is forged here.
	otherTok := strings.TrimSpace(runStoreCLI(t, testenv.PrivateDir(t), "token", "mint").out)
	if _, err := exectoken.Verify(key, otherTok, time.Now()); !errors.Is(err, exectoken.ErrForged) {
		t.Errorf("token from another data dir: %v, want ErrForged", err)
	}
}

func TestTokenMintRefuses(t *testing.T) {
	dir := testenv.PrivateDir(t)
	for name, args := range map[string][]string{
		"zero ttl":      {"--ttl", "0s"},
		"negative ttl":  {"--ttl", "-1h"},
		"sub-second":    {"--ttl", "10ms"},
		"huge ttl":      {"--ttl", "10000h"},
		"garbage ttl":   {"--ttl", "soon"},
		"empty princ":   {"--principal", ""},
		"NUL principal": {"--principal", "a\x00"},
	} {
		r := runStoreCLI(t, dir, append([]string{"token", "mint"}, args...)...)
		if r.code == 0 || r.out != "" || r.errOut == "" {
			t.Errorf("%s: code %d, stdout %q, stderr %q; want failure on stderr only", name, r.code, r.out, r.errOut)
		}
	}
}

func TestTokenVerify(t *testing.T) {
	dir := testenv.PrivateDir(t)
	tok := strings.TrimSpace(runStoreCLI(t, dir, "token", "mint", "--principal", "alice").out)
	r := runStoreCLI(t, dir, "token", "verify", tok)
	if r.code != 0 || !strings.Contains(r.out, "principal: alice") {
		t.Errorf("token verify: %d %q %q", r.code, r.out, r.errOut)
	}
	r = runStoreCLIIn(t, context.Background(), dir, tok+"\n", "token", "verify", "-")
	if r.code != 0 || !strings.Contains(r.out, "alice") {
		t.Errorf("token verify -: %d %q %q", r.code, r.out, r.errOut)
	}
	for name, bad := range map[string]string{
		"tampered": tok[:len(tok)-2] + "AA",
		"garbage":  "hello",
		"foreign":  strings.TrimSpace(runStoreCLI(t, testenv.PrivateDir(t), "token", "mint").out),
	} {
		r := runStoreCLI(t, dir, "token", "verify", bad)
		if r.code == 0 || !strings.Contains(r.errOut, "invalid execution token") {
			t.Errorf("%s: code %d, stderr %q", name, r.code, r.errOut)
		}
	}
}
