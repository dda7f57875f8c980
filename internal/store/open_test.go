package store_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/datadir"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/testenv"
	_ "modernc.org/sqlite"
)

// helperEnv makes the test binary act as a second process appending to a store; see
// TestMain.
const helperEnv = "TOOLGATE_STORE_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode))
	}
	code := m.Run()
	testenv.StopPostgres()
	os.Exit(code)
}

// openDirOrURL opens a PostgreSQL store for a postgres:// argument, else the SQLite
// store in that directory.
func openDirOrURL(ctx context.Context, where string) (*store.Store, error) {
	if strings.HasPrefix(where, "postgres://") {
		return store.OpenPostgres(ctx, where)
	}
	return store.Open(ctx, where)
}

// helper runs in a child process (DIR may be a postgres:// URL): "append DIR NAME N" appends N events as principal
// NAME; "grant DIR NAME" adds a grant for principal NAME; "stream DIR" appends forever, printing each seq only after AppendAudit returned.
func helper(mode string) int {
	f := strings.Fields(mode)
	ctx := context.Background()
	s, err := openDirOrURL(ctx, f[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer s.Close()
	switch f[0] {
	case "append":
		n, _ := strconv.Atoi(f[3])
		for i := range n {
			e := &audit.Event{CallID: fmt.Sprintf("%s-%d", f[2], i), Principal: f[2], Tool: "files.read", Decision: audit.Allowed}
			if err := s.AppendAudit(ctx, e); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		return 0
	case "key":
		k, err := s.Key(ctx, "token")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("%x\n", k)
		return 0
	case "grant":
		if _, err := s.AddGrant(ctx, policy.Grant{Principal: f[2], Tool: "files.read", Effect: policy.Allow}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	case "stream":
		w := bufio.NewWriter(os.Stdout)
		for i := 0; ; i++ {
			e := &audit.Event{CallID: fmt.Sprintf("stream-%d", i), Principal: "streamer", Tool: "files.read", Decision: audit.Allowed}
			if err := s.AppendAudit(ctx, e); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			fmt.Fprintln(w, e.Seq)
			w.Flush()
		}
	}
	return 3
}

func helperCmd(t *testing.T, args string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+args)
	return cmd
}

func TestPermissions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "data")
	s, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	// Force the WAL and shared-memory files into existence.
	if err := s.SetMeta(context.Background(), "k", "v"); err != nil {
		t.Fatal(err)
	}
	checkMode(t, dir, 0o700)
	for _, f := range []string{store.DBFile, store.DBFile + "-wal", store.DBFile + "-shm"} {
		checkMode(t, filepath.Join(dir, f), 0o600)
	}

	// While the store is open, every file loosened in turn: a second open (another
	// command) refuses, names the file and the chmod, and changes nothing on disk; the
	// store opens again once the suggested chmod ran, with its data.
	for _, f := range []string{"", store.DBFile, store.DBFile + "-wal", store.DBFile + "-shm"} {
		p, loose, fix := filepath.Join(dir, f), os.FileMode(0o644), "chmod 600 "
		if f == "" {
			p, loose, fix = dir, 0o755, "chmod 700 "
		}
		if err := os.Chmod(p, loose); err != nil {
			t.Fatal(err)
		}
		_, err := store.Open(context.Background(), dir)
		if !errors.Is(err, datadir.ErrUnsafe) || !strings.Contains(err.Error(), fix+p) {
			t.Errorf("open with %s at %04o = %v; want a refusal naming %q", p, loose, err, fix+p)
		}
		checkMode(t, p, loose)
		os.Chmod(p, loose&0o700)
		s2, err := store.Open(context.Background(), dir)
		if err != nil {
			t.Fatalf("after the chmod: %v", err)
		}
		if v, ok, err := s2.Meta(context.Background(), "k"); err != nil || !ok || v != "v" {
			t.Errorf("data after the refusal: %q %v %v", v, ok, err)
		}
		s2.Close()
	}
	s.Close()
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Errorf("stat: %v", err)
		return
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s has mode %04o, want %04o", filepath.Base(path), got, want)
	}
}

func TestOpenRefuses(t *testing.T) {
	ctx := context.Background()
	if _, err := store.Open(ctx, ""); err == nil {
		t.Error("Open(\"\") succeeded")
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Open(ctx, file); err == nil {
		t.Error("Open(a regular file) succeeded")
	}
	// A database path that is a directory.
	dir := testenv.PrivateDir(t)
	if err := os.Mkdir(filepath.Join(dir, store.DBFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Open(ctx, dir); err == nil {
		t.Error("Open with a directory as the database succeeded")
	}
	// Not a database at all.
	junk := testenv.PrivateDir(t)
	if err := os.WriteFile(filepath.Join(junk, store.DBFile), []byte(strings.Repeat("not sqlite ", 500)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Open(ctx, junk); err == nil {
		t.Error("Open of a corrupt database succeeded")
	}
}

// TestOddPath checks that characters meaningful in a file: URI reach the file system
// literally.
func TestOddPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a?b#c%20d e ü&_pragma=x")
	s, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.SetMeta(context.Background(), "k", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, store.DBFile)); err != nil {
		t.Errorf("database not at the literal path: %v", err)
	}
}

// schemaVersion is the highest migration this build ships.
const schemaVersion = 6

func TestMigrationsIdempotentAndPersistent(t *testing.T) {
	ctx := context.Background()
	dir := testenv.PrivateDir(t)
	for i := range 3 {
		s, err := store.Open(ctx, dir)
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		v, err := s.SchemaVersion(ctx)
		if err != nil || v != schemaVersion {
			t.Errorf("open %d: schema version %d, %v; want %d", i, v, err, schemaVersion)
		}
		if i == 0 {
			if err := s.SetMeta(ctx, "kept", "yes"); err != nil {
				t.Fatal(err)
			}
		}
		if got, ok, err := s.Meta(ctx, "kept"); err != nil || !ok || got != "yes" {
			t.Errorf("open %d: data lost across reopen: %q %v %v", i, got, ok, err)
		}
		s.Close()
	}
	// Each migration is recorded exactly once.
	db := rawDB(t, dir)
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil || n != schemaVersion {
		t.Errorf("schema_migrations has %d rows (%v), want %d", n, err, schemaVersion)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	ctx := context.Background()
	dir := testenv.PrivateDir(t)
	s, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db := rawDB(t, dir)
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, '9999_future.sql', 'x')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = store.Open(ctx, dir)
	if !errors.Is(err, store.ErrSchemaTooNew) {
		t.Fatalf("Open of a newer schema = %v, want ErrSchemaTooNew", err)
	}
	if !strings.Contains(err.Error(), "9999") {
		t.Errorf("error %q does not name the version", err)
	}
}

func rawDB(t *testing.T, dir string) *sql.DB {
	t.Helper()
	// Created 0600 first, as store.Open would (SQLite alone makes it 0644).
	path := filepath.Join(dir, store.DBFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestConcurrentOpen opens one fresh data directory from several processes at once:
// migrations run once and nobody fails.
func TestConcurrentOpen(t *testing.T) {
	dir := testenv.PrivateDir(t)
	var cmds []*exec.Cmd
	for i := range 4 {
		cmd := helperCmd(t, fmt.Sprintf("append %s opener-%d 1", dir, i))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("child: %v", err)
		}
	}
	s, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	evs, err := s.ListAudit(context.Background(), audit.Filter{})
	if err != nil || len(evs) != 4 {
		t.Fatalf("%d events, %v; want 4", len(evs), err)
	}
	if err := audit.Verify(evs); err != nil {
		t.Error(err)
	}
}

// TestKeyAcrossProcesses asks several fresh processes for the same key at once: exactly
// one key is created and every process gets it. The processes also race to create and
// migrate the database and to switch it to WAL, where SQLite can answer SQLITE_BUSY
// without waiting; Open must ride that out, so every round uses a fresh directory.
func TestKeyAcrossProcesses(t *testing.T) {
	for round := range 3 {
		keyRound(t, round)
	}
}

func keyRound(t *testing.T, round int) {
	dir := testenv.PrivateDir(t)
	var cmds []*exec.Cmd
	var outs, errs []*strings.Builder
	for range 8 {
		cmd := helperCmd(t, "key "+dir)
		out, errb := &strings.Builder{}, &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs, errs = append(cmds, cmd), append(outs, out), append(errs, errb)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("round %d child %d: %v: %s", round, i, err, errs[i])
		}
	}
	s := openDir(t, dir)
	k, err := s.Key(context.Background(), "token")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%x\n", k)
	for i, out := range outs {
		if out.String() != want {
			t.Errorf("process %d got key %q, want %q", i, out.String(), want)
		}
	}
}

func openDir(t *testing.T, dir string) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestMultiProcessChain appends from several processes and from goroutines of this one
// at once; the result must be one unbroken chain holding every event.
func TestMultiProcessChain(t *testing.T) {
	dir := testenv.PrivateDir(t)
	testMultiProcessChain(t, dir, openDir(t, dir))
}

// testMultiProcessChain appends from three child processes opening where (a data
// directory or a postgres:// URL) and from four goroutines spread over stores, all at
// once, then checks through every store that one unbroken chain holds every event.
func testMultiProcessChain(t *testing.T, where string, stores ...*store.Store) {
	ctx := context.Background()
	const procs, perProc, goroutines, perG = 3, 60, 4, 30
	var cmds []*exec.Cmd
	for p := range procs {
		cmd := helperCmd(t, fmt.Sprintf("append %s proc-%d %d", where, p, perProc))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("child stderr: %s", stderr.String())
			}
		})
		cmds = append(cmds, cmd)
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		s := stores[g%len(stores)]
		wg.Go(func() {
			for i := range perG {
				e := &audit.Event{CallID: fmt.Sprintf("g%d-%d", g, i), Principal: fmt.Sprintf("goroutine-%d", g), Tool: "files.read", Decision: audit.Allowed}
				if err := s.AppendAudit(ctx, e); err != nil {
					t.Errorf("AppendAudit: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("child process: %v", err)
		}
	}
	s := stores[0]
	evs, err := s.ListAudit(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if want := procs*perProc + goroutines*perG; len(evs) != want {
		t.Errorf("%d events, want %d", len(evs), want)
	}
	if err := audit.Verify(evs); err != nil {
		t.Errorf("chain broken by concurrent processes: %v", err)
	}
	for i, other := range stores[1:] {
		if got, err := other.ListAudit(ctx, audit.Filter{}); err != nil || !reflect.DeepEqual(evs, got) {
			t.Errorf("store %d reads a different chain (%v)", i+1, err)
		}
	}
	for p := range procs {
		got, err := s.ListAudit(ctx, audit.Filter{Principal: fmt.Sprintf("proc-%d", p)})
		if err != nil || len(got) != perProc {
			t.Errorf("process %d: %d events (%v), want %d", p, len(got), err, perProc)
		}
	}
}

// TestKillAfterAppend kills -9 a process that is appending as fast as it can; every
// event it reported as appended (it prints a seq only after AppendAudit returned) must
// be in the log, and the chain must still verify.
func TestKillAfterAppend(t *testing.T) {
	dir := testenv.PrivateDir(t)
	cmd := helperCmd(t, "stream "+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var last int64
	for last < 50 && sc.Scan() {
		last, _ = strconv.ParseInt(sc.Text(), 10, 64)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Lines already written before the kill also count as acknowledged.
	for sc.Scan() {
		if n, err := strconv.ParseInt(sc.Text(), 10, 64); err == nil {
			last = n
		}
	}
	cmd.Wait()
	if last < 50 {
		t.Fatalf("child acknowledged only %d events", last)
	}
	s, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	evs, err := s.ListAudit(context.Background(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(evs)) < last {
		t.Errorf("after kill -9: %d events stored, but %d were acknowledged", len(evs), last)
	}
	if err := audit.Verify(evs); err != nil {
		t.Errorf("chain after kill -9: %v", err)
	}
}

// The audit benchmarks run at each durability level (docs/performance.md).
func BenchmarkAppendAudit(b *testing.B) {
	eachDurability(b, func(b *testing.B, d store.Option) { benchAppendAudit(b, openTemp(b, d)) })
}

func eachDurability(b *testing.B, f func(*testing.B, store.Option)) {
	for _, d := range []store.Durability{store.DurabilityProcess, store.DurabilityPower} {
		b.Run(string(d), func(b *testing.B) { f(b, store.WithDurability(d)) })
	}
}

// benchAppendAudit appends one kernel-sized event at a time to s.
func benchAppendAudit(b *testing.B, s *store.Store) {
	ctx := context.Background()
	args := audit.HashArgs([]byte("0123456789abcdef0123456789abcdef"), map[string]any{"path": "docs/a.md", "limit": 10})
	b.ReportAllocs()
	for b.Loop() {
		e := &audit.Event{CallID: "c_0123456789", TurnID: "t_1", Principal: "agent", Transport: "stdio", Tool: "files.read",
			Action: "read", Resource: "path:docs/a.md", Decision: audit.Allowed, GrantID: "g_1", LatencyMicros: 120, Args: args}
		if err := s.AppendAudit(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendAuditParallel measures the per-event cost when many calls append at
// once (64 goroutines on two cores), where group commit shares one fsync among them.
func BenchmarkAppendAuditParallel(b *testing.B) {
	eachDurability(b, func(b *testing.B, d store.Option) { benchAppendAuditParallel(b, openTemp(b, d)) })
}

// benchAppendAuditParallel appends from 64 goroutines spread over stores (one store
// per process or replica).
func benchAppendAuditParallel(b *testing.B, stores ...*store.Store) {
	ctx := context.Background()
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		s := stores[int(next.Add(1))%len(stores)]
		for pb.Next() {
			e := &audit.Event{CallID: "c", Principal: "agent", Tool: "files.read", Decision: audit.Allowed}
			if err := s.AppendAudit(ctx, e); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// TestNoClearArgsOnDisk appends an event whose argument is a secret, as the kernel does
// (through HashArgs), and checks that no file in the data directory contains it.
func TestNoClearArgsOnDisk(t *testing.T) {
	ctx := context.Background()
	dir := testenv.PrivateDir(t)
	s, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	key, err := s.Key(ctx, "audit-hmac")
	if err != nil {
		t.Fatal(err)
	}
	const canary = "sk-live-CANARY-4f1e9b"
	e := &audit.Event{Principal: "p", Tool: "http.fetch", Decision: audit.Allowed,
		Args: audit.HashArgs(key, map[string]any{"token": canary, "headers": map[string]any{"Authorization": "Bearer " + canary}})}
	if err := s.AppendAudit(ctx, e); err != nil {
		t.Fatal(err)
	}
	s.Close()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range entries {
		b, err := os.ReadFile(filepath.Join(dir, ent.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("CANARY")) {
			t.Errorf("%s contains the clear argument value", ent.Name())
		}
	}
}

// TestManyConcurrentCallers runs far more concurrent callers than the connection pool
// holds, mixing reads and audit appends: none fails, nothing deadlocks, the chain holds.
func TestManyConcurrentCallers(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	const callers = 300
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			if _, err := s.ListGrants(ctx); err != nil {
				t.Errorf("ListGrants: %v", err)
			}
			if _, err := s.Namespaces(ctx); err != nil {
				t.Errorf("Namespaces: %v", err)
			}
			e := &audit.Event{CallID: fmt.Sprint(i), Principal: "p", Tool: "t.x", Decision: audit.Allowed}
			if err := s.AppendAudit(ctx, e); err != nil {
				t.Errorf("AppendAudit: %v", err)
			}
		})
	}
	wg.Wait()
	evs, err := s.ListAudit(ctx, audit.Filter{})
	if err != nil || len(evs) != callers {
		t.Fatalf("%d events, %v; want %d", len(evs), err, callers)
	}
	if err := audit.Verify(evs); err != nil {
		t.Error(err)
	}
}
