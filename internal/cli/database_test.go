package cli_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/testenv"
)

// Two data directories pointed at one PostgreSQL database (by --database-url or
// TOOLGATE_DATABASE_URL) are two replicas of one deployment: a grant, a namespace
// switch and a token made through one are seen by the other, and the audit chain
// verifies from either.
func TestDatabaseURLSharesTheStore(t *testing.T) {
	dbURL := testenv.Postgres(t)
	dirA, dirB := testenv.PrivateDir(t), testenv.PrivateDir(t)
	r := runStoreCLI(t, dirA, "--database-url", dbURL, "grant", "add", "--principal", "bob", "--tool", "files.read")
	if r.code != 0 || !strings.HasPrefix(r.out, "g_") {
		t.Fatalf("grant add: %d %q %q", r.code, r.out, r.errOut)
	}
	id := strings.TrimSpace(r.out)
	t.Setenv(store.EnvDatabaseURL, dbURL)
	if r := runStoreCLI(t, dirB, "grant", "ls"); r.code != 0 || !strings.Contains(r.out, id) {
		t.Errorf("grant ls through %s on another data directory: %d %q %q", store.EnvDatabaseURL, r.code, r.out, r.errOut)
	}
	if r := runStoreCLI(t, dirA, "namespaces", "disable", "github"); r.code != 0 {
		t.Fatalf("namespaces disable: %d %q", r.code, r.errOut)
	}
	if r := runStoreCLI(t, dirB, "namespaces", "ls"); !strings.Contains(r.out, "github") || !strings.Contains(r.out, "disabled") {
		t.Errorf("namespaces ls on the other replica: %q", r.out)
	}
	tok := runStoreCLI(t, dirA, "token", "mint", "--principal", "bob")
	if r := runStoreCLI(t, dirB, "token", "verify", strings.TrimSpace(tok.out)); r.code != 0 || !strings.Contains(r.out, "bob") {
		t.Errorf("a token minted on one replica does not verify on the other: %d %q %q", r.code, r.out, r.errOut)
	}
	if r := runStoreCLI(t, dirB, "audit", "--verify"); r.code != 0 || !strings.HasPrefix(r.out, "audit chain ok") {
		t.Errorf("audit --verify: %d %q %q", r.code, r.out, r.errOut)
	}
	// The flag wins over the environment.
	if r := runStoreCLI(t, dirB, "--database-url", "mysql://x", "grant", "ls"); r.code == 0 || !strings.Contains(r.errOut, "--database-url") {
		t.Errorf("a bad --database-url beside a good %s: %d %q", store.EnvDatabaseURL, r.code, r.errOut)
	}
}

// A database URL that is not PostgreSQL's, or does not reach it, fails the command with
// an error naming where it came from and never showing the password.
func TestDatabaseURLRefused(t *testing.T) {
	good, err := url.Parse(testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	const pw = "pa55-w0rd-CANARY"
	wrong := *good
	wrong.User = url.UserPassword(good.User.Username(), pw)
	for raw, want := range map[string]string{
		"mysql://u:" + pw + "@127.0.0.1/db": "want postgres://",
		"postgres://u:" + pw + "%zz@h/db":   "not a valid URL",
		"host=h password=" + pw:             "want postgres://",
		wrong.String():                      "password authentication failed",
	} {
		for _, viaEnv := range []bool{false, true} {
			args := []string{"--database-url", raw, "grant", "ls"}
			source := "--database-url"
			if viaEnv {
				t.Setenv(store.EnvDatabaseURL, raw)
				args, source = []string{"grant", "ls"}, store.EnvDatabaseURL
			}
			want := want
			if want != "password authentication failed" {
				want = source + ": database URL: " + want
			}
			r := runStoreCLI(t, testenv.PrivateDir(t), args...)
			if r.code == 0 || !strings.Contains(r.errOut, want) {
				t.Errorf("%q (env %v): code %d, stderr %q; want it to say %q", raw, viaEnv, r.code, r.errOut, want)
			}
			if strings.Contains(r.errOut+r.out, pw) {
				t.Errorf("%q (env %v): the password is shown: %q", raw, viaEnv, r.errOut)
			}
		}
	}
}

// toolgate run --stdio would hand the harness a toolgate mcp that opens another store
// (or the database password): with a PostgreSQL store it is refused before anything
// starts.
func TestRunStdioRefusedWithADatabaseURL(t *testing.T) {
	t.Setenv(store.EnvDatabaseURL, "postgres://u:pw@127.0.0.1:1/db")
	r := runStoreCLI(t, testenv.PrivateDir(t), "run", "--harness", "opencode", "--stdio", "--", "/nonexistent/harness")
	if r.code == 0 || !strings.Contains(r.errOut, "--stdio does not work with a PostgreSQL store") {
		t.Errorf("run --stdio with a database URL: %d %q", r.code, r.errOut)
	}
}

// An unknown audit durability level is refused, naming where it came from, before the
// store is opened; the flag wins over the environment.
func TestAuditDurabilityRefused(t *testing.T) {
	dir := testenv.PrivateDir(t)
	r := runStoreCLI(t, dir, "--audit-durability", "fsync", "run", "--harness", "codex", "--", "true")
	if r.code == 0 || !strings.Contains(r.errOut, `--audit-durability: audit durability "fsync": want "process" or "power"`) {
		t.Errorf("--audit-durability fsync: %d %q", r.code, r.errOut)
	}
	t.Setenv("TOOLGATE_AUDIT_DURABILITY", "Power")
	r = runStoreCLI(t, dir, "run", "--harness", "codex", "--", "true")
	if r.code == 0 || !strings.Contains(r.errOut, "TOOLGATE_AUDIT_DURABILITY: ") {
		t.Errorf("TOOLGATE_AUDIT_DURABILITY=Power: %d %q", r.code, r.errOut)
	}
	r = runStoreCLI(t, dir, "--audit-durability", "fsync", "run", "--harness", "codex", "--", "true")
	if !strings.Contains(r.errOut, "--audit-durability: ") {
		t.Errorf("the flag does not win over the environment: %q", r.errOut)
	}
}
