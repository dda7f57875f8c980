package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgreSQL for tests: one throw-away server per test binary, started on first use by
// Postgres and stopped by StopPostgres (which the package's TestMain calls after m.Run).
// It is Debian's postgresql package (scripts/deps.sh installs it): initdb into a fresh
// folder under the OS temp directory, run as an unprivileged user (initdb and postgres
// refuse root), listening on 127.0.0.1 only, on a free port, with password
// (SCRAM) authentication. Each Postgres call gets a new empty database owned by an
// ordinary, non-superuser role, which is what an operator gives toolgate
// (docs/deployment.md).

const (
	pgSuperuser = "toolgate_admin"
	pgAppRole   = "toolgate_app"
	pgTempGlob  = "toolgate-pg-*"
)

var pg struct {
	once     sync.Once
	err      error
	missing  string // why there is no PostgreSQL, when it is not installed
	dir      string
	port     int
	password string
	cmd      *exec.Cmd
	exited   chan struct{}

	mu    sync.Mutex // guards admin and n
	admin *pgx.Conn
	n     int
}

// Postgres returns the URL of a fresh, empty database on this test binary's
// PostgreSQL server, starting the server on first use. The URL's role is an ordinary
// login role that owns the database. Without PostgreSQL installed the test is skipped,
// or fails when TOOLGATE_REQUIRE_PEERS is set.
func Postgres(t testing.TB) string {
	t.Helper()
	pg.once.Do(startPostgres)
	if pg.missing != "" {
		missing(t, "%s", pg.missing)
	}
	if pg.err != nil {
		t.Fatalf("starting PostgreSQL: %v", pg.err)
	}
	pg.mu.Lock()
	defer pg.mu.Unlock()
	pg.n++
	name := fmt.Sprintf("tg_%d", pg.n)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := pg.admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s OWNER %s", name, pgAppRole)); err != nil {
		t.Fatalf("creating test database %s: %v", name, err)
	}
	return pgURL(pgAppRole, name)
}

// PostgresAdmin returns a superuser URL of the test server's maintenance database, for
// tests that inspect or disturb the server itself (pg_stat_activity, terminating
// backends of other roles). Postgres must have been called first.
func PostgresAdmin(t testing.TB) string {
	t.Helper()
	if pg.admin == nil {
		t.Fatal("testenv.PostgresAdmin before testenv.Postgres")
	}
	return pgURL(pgSuperuser, "postgres")
}

func pgURL(role, db string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(role, pg.password),
		Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(pg.port)), Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// StopPostgres stops the test server, if one was started, and removes its folder.
// Call it from TestMain after m.Run. Should the test binary die first (a panic, a
// timeout), the server gets SIGQUIT from the kernel (its parent-death signal) and the
// next test binary to start one removes the folder.
func StopPostgres() {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if pg.admin != nil {
		pg.admin.Close(context.Background())
		pg.admin = nil
	}
	if pg.cmd != nil && pg.cmd.Process != nil {
		pg.cmd.Process.Signal(syscall.SIGINT) // fast shutdown
		select {
		case <-pg.exited:
		case <-time.After(15 * time.Second):
			pg.cmd.Process.Kill()
			<-pg.exited
		}
		pg.cmd = nil
	}
	if pg.dir != "" {
		os.RemoveAll(pg.dir)
		pg.dir = ""
	}
}

// pgBinDir finds the folder holding initdb and postgres: the newest
// /usr/lib/postgresql/N/bin (Debian's layout, where postgres is not on PATH), else
// the folder of an initdb found on PATH.
func pgBinDir() (string, bool) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(r))
		}
	}
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, true
		}
	}
	return "", false
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// pgCredential is who runs initdb and postgres: this user when not root, else the
// postgres user the Debian package creates, else nobody.
func pgCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
	}
	return nil, errors.New("running as root and neither a postgres nor a nobody user exists to run PostgreSQL as")
}

func startPostgres() {
	bin, ok := pgBinDir()
	if !ok {
		pg.missing = "PostgreSQL is not installed (no initdb and postgres in /usr/lib/postgresql/*/bin or on PATH)"
		return
	}
	removeStalePostgresDirs()
	cred, err := pgCredential()
	if err != nil {
		pg.err = err
		return
	}
	if pg.err = initPostgres(bin, cred); pg.err != nil {
		StopPostgres()
		return
	}
	// A port found free can be taken before the server binds it; try a few.
	for attempt := 0; attempt < 5; attempt++ {
		if pg.err = runPostgres(bin, cred); pg.err == nil {
			break
		}
	}
	if pg.err == nil {
		pg.err = setupPostgres()
	}
	if pg.err != nil {
		StopPostgres()
	}
}

// removeStalePostgresDirs removes server folders left by test binaries that died
// without StopPostgres (each folder's name carries its binary's pid).
func removeStalePostgresDirs() {
	old, _ := filepath.Glob(filepath.Join(os.TempDir(), pgTempGlob))
	for _, d := range old {
		f := strings.SplitN(filepath.Base(d), "-", 4)
		if len(f) < 4 {
			continue
		}
		pid, err := strconv.Atoi(f[2])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(d)
		}
	}
}

func initPostgres(bin string, cred *syscall.Credential) error {
	dir, err := os.MkdirTemp("", fmt.Sprintf("toolgate-pg-%d-", os.Getpid()))
	if err != nil {
		return err
	}
	pg.dir = dir
	var pw [16]byte
	rand.Read(pw[:])
	pg.password = hex.EncodeToString(pw[:])
	pwfile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(pg.password+"\n"), 0o600); err != nil {
		return err
	}
	if cred != nil {
		for _, p := range []string{dir, pwfile} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return err
			}
		}
	}
	cmd := exec.Command(filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", pgSuperuser,
		"--pwfile", pwfile, "--auth", "scram-sha-256", "--encoding", "UTF8", "--locale", "C", "--no-sync")
	cmd.Dir = dir
	cmd.Env = pgEnv(dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	return nil
}

func pgEnv(dir string) []string {
	return []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "LC_ALL=C", "TZ=UTC"}
}

// runPostgres starts the server on a free loopback port and waits until it accepts
// connections.
func runPostgres(bin string, cred *syscall.Credential) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	pg.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	logPath := filepath.Join(pg.dir, "server.log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", filepath.Join(pg.dir, "data"),
		"-c", "listen_addresses=127.0.0.1", "-c", "port="+strconv.Itoa(pg.port),
		"-c", "unix_socket_directories="+pg.dir, "-c", "max_connections=300",
		"-c", "log_min_messages=warning", "-c", "log_min_error_statement=panic")
	cmd.Dir = pg.dir
	cmd.Env = pgEnv(pg.dir)
	cmd.Stdout, cmd.Stderr = logf, logf
	// SIGQUIT (immediate shutdown) when this test binary dies without StopPostgres.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	if err := startOnPinnedThread(cmd); err != nil {
		return fmt.Errorf("starting postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	pg.cmd, pg.exited = cmd, exited

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, pgURL(pgSuperuser, "postgres"))
		if err == nil {
			pg.admin = conn
			return nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(logPath)
			pg.cmd = nil
			return fmt.Errorf("postgres exited: %s", log)
		case <-ctx.Done():
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("postgres did not accept connections within a minute: %v\n%s", err, log)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startOnPinnedThread starts cmd from an OS thread that lives as long as the process.
// The parent-death signal fires when the thread that forked the child exits, and the
// Go runtime ends a thread whose goroutine exits while locked to it (sandbox code in
// tests does); a thread locked by a goroutine that never returns is never ended.
func startOnPinnedThread(cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- cmd.Start()
		select {} // keep the thread
	}()
	return <-errc
}

func setupPostgres() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := pg.admin.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", pgAppRole, pg.password))
	return err
}
