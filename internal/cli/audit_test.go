package cli_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/cli"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/testenv"
)

// seedAudit appends events through the store, as the kernel would.
func seedAudit(t *testing.T, dir string, evs ...*audit.Event) {
	t.Helper()
	s, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, e := range evs {
		if err := s.AppendAudit(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
}

func ev(principal, tool string, d audit.Decision, at time.Time) *audit.Event {
	return &audit.Event{Time: at, CallID: "c_" + principal + tool, Principal: principal, Tool: tool, Action: "read",
		Resource: "path:docs/a.md", Decision: d, GrantID: "g_1", Code: map[audit.Decision]string{audit.Denied: "no_matching_grant"}[d],
		Args: map[string]string{"path": strings.Repeat("ab", 32)}}
}

func standardAudit(t *testing.T) string {
	dir := testenv.PrivateDir(t)
	now := time.Now()
	seedAudit(t, dir,
		ev("alice", "files.read", audit.Allowed, now.Add(-48*time.Hour)),
		ev("bob", "files.read", audit.Denied, now.Add(-2*time.Hour)),
		ev("alice", "bash.run", audit.Failed, now.Add(-time.Hour)),
		ev("alice", "files.write", audit.Allowed, now.Add(-time.Minute)),
	)
	return dir
}

func seqsOfJSONLines(t *testing.T, out string) []int64 {
	t.Helper()
	var seqs []int64
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var e audit.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("line %q is not an event: %v", line, err)
		}
		seqs = append(seqs, e.Seq)
	}
	return seqs
}

func TestAuditList(t *testing.T) {
	dir := standardAudit(t)
	r := runStoreCLI(t, dir, "audit")
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if r.code != 0 || len(lines) != 5 || !strings.HasPrefix(lines[0], "SEQ") {
		t.Fatalf("audit table: %d %q\n%s", r.code, r.errOut, r.out)
	}
	if !strings.Contains(lines[2], "bob") || !strings.Contains(lines[2], "denied") || !strings.Contains(lines[2], "no_matching_grant") {
		t.Errorf("row 2 = %q", lines[2])
	}

	r = runStoreCLI(t, dir, "audit", "--json")
	var all []audit.Event
	for _, line := range strings.Split(strings.TrimSpace(r.out), "\n") {
		var e audit.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		all = append(all, e)
	}
	if err := audit.Verify(all); err != nil || len(all) != 4 {
		t.Errorf("JSON lines do not carry the full chain (%d events): %v", len(all), err)
	}

	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--principal", "alice"}, "[1 3 4]"},
		{[]string{"--tool", "files.read"}, "[1 2]"},
		{[]string{"--decision", "denied"}, "[2]"},
		{[]string{"--call-id", "c_alicebash.run"}, "[3]"},
		{[]string{"--since", "3h"}, "[2 3 4]"},
		{[]string{"--until", "90m"}, "[1 2]"},
		{[]string{"--since", time.Now().Add(-3 * time.Hour).UTC().Format(time.RFC3339)}, "[2 3 4]"},
		{[]string{"--since", time.Now().UTC().Add(24 * time.Hour).Format(time.DateOnly)}, "[]"},
		{[]string{"--limit", "2"}, "[1 2]"},
		{[]string{"--principal", "alice", "--decision", "allowed", "--limit", "1"}, "[1]"},
		{[]string{"--principal", "nobody"}, "[]"},
	}
	for _, tc := range cases {
		r := runStoreCLI(t, dir, append([]string{"audit", "--json"}, tc.args...)...)
		if r.code != 0 {
			t.Errorf("%v: %d %s", tc.args, r.code, r.errOut)
			continue
		}
		if got := fmt.Sprint(seqsOfJSONLines(t, r.out)); got != tc.want {
			t.Errorf("audit %v = %s, want %s", tc.args, got, tc.want)
		}
	}
	if r := runStoreCLI(t, dir, "audit", "--principal", "nobody"); r.code != 0 || !strings.Contains(r.out, "no audit events") {
		t.Errorf("empty table result: %d %q", r.code, r.out)
	}
}

func TestAuditListPaging(t *testing.T) {
	// More events than one page, so listing and verifying cross page boundaries.
	dir := testenv.PrivateDir(t)
	var evs []*audit.Event
	for i := range 1100 {
		evs = append(evs, &audit.Event{Principal: fmt.Sprintf("p%d", i%3), Tool: "files.read", Decision: audit.Allowed})
	}
	seedAudit(t, dir, evs...)
	r := runStoreCLI(t, dir, "audit", "--json")
	if seqs := seqsOfJSONLines(t, r.out); len(seqs) != 1100 || seqs[1099] != 1100 {
		t.Errorf("listed %d events", len(seqs))
	}
	r = runStoreCLI(t, dir, "audit", "--json", "--principal", "p1", "--limit", "1050")
	if seqs := seqsOfJSONLines(t, r.out); len(seqs) != 367 {
		t.Errorf("filtered listing: %d events, want 367", len(seqs))
	}
	r = runStoreCLI(t, dir, "audit", "--json", "--limit", "1050")
	if seqs := seqsOfJSONLines(t, r.out); len(seqs) != 1050 {
		t.Errorf("--limit 1050 listed %d", len(seqs))
	}
	if r = runStoreCLI(t, dir, "audit", "--verify"); r.code != 0 || !strings.Contains(r.out, "1100 events") {
		t.Errorf("verify: %d %q %q", r.code, r.out, r.errOut)
	}
}

func tamper(t *testing.T, dir, stmt string) {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, store.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(stmt); err != nil {
		t.Fatal(err)
	}
}

func TestAuditVerify(t *testing.T) {
	dir := standardAudit(t)
	r := runStoreCLI(t, dir, "audit", "--verify")
	if r.code != 0 || !strings.HasPrefix(r.out, "audit chain ok: 4 events, head seq 4 hash ") {
		t.Fatalf("intact verify: %d %q %q", r.code, r.out, r.errOut)
	}
	if r := runStoreCLI(t, testenv.PrivateDir(t), "audit", "--verify"); r.code != 0 || !strings.Contains(r.out, "no events") {
		t.Errorf("empty verify: %d %q", r.code, r.out)
	}

	cases := []struct {
		name, stmt, want string
	}{
		{"edited", `UPDATE audit_events SET decision = 'allowed' WHERE seq = 2`, "seq 2: its content does not match its hash"},
		{"edited args", `UPDATE audit_events SET args = '{"path":"00"}' WHERE seq = 3`, "seq 3"},
		{"deleted", `DELETE FROM audit_events WHERE seq = 2`, "seq 2: seq 3 follows seq 1"},
		{"deleted first", `DELETE FROM audit_events WHERE seq = 1`, "seq 1"},
		{"swapped", `UPDATE audit_events SET seq = -2 WHERE seq = 2; UPDATE audit_events SET seq = 2 WHERE seq = 3; UPDATE audit_events SET seq = 3 WHERE seq = -2`, "seq 2"},
	}
	for _, tc := range cases {
		d := standardAudit(t)
		tamper(t, d, tc.stmt)
		r := runStoreCLI(t, d, "audit", "--verify")
		if r.code != cli.ExitChainBroken || !strings.Contains(r.errOut, tc.want) || r.out != "" {
			t.Errorf("%s: code %d, stdout %q, stderr %q; want exit %d naming %q", tc.name, r.code, r.out, r.errOut, cli.ExitChainBroken, tc.want)
		}
	}
}

func TestAuditVerifyAnchor(t *testing.T) {
	dir := standardAudit(t)
	r := runStoreCLI(t, dir, "audit", "--verify")
	var seq int64
	var hash string
	if _, err := fmt.Sscanf(r.out, "audit chain ok: 4 events, head seq %d hash %s", &seq, &hash); err != nil {
		t.Fatalf("parsing %q: %v", r.out, err)
	}
	anchor := fmt.Sprintf("%d:%s", seq, hash)
	// Still passing through the anchor after more events.
	seedAudit(t, dir, ev("zed", "files.read", audit.Allowed, time.Time{}))
	if r := runStoreCLI(t, dir, "audit", "--verify", "--anchor", anchor); r.code != 0 || !strings.Contains(r.out, "5 events") {
		t.Errorf("anchored verify of an extended chain: %d %q %q", r.code, r.out, r.errOut)
	}
	// The newest events removed: the chain alone still verifies, the anchor does not.
	tamper(t, dir, `DELETE FROM audit_events WHERE seq >= 4`)
	if r := runStoreCLI(t, dir, "audit", "--verify"); r.code != 0 {
		t.Fatalf("truncated chain without anchor: %d %q", r.code, r.errOut)
	}
	r = runStoreCLI(t, dir, "audit", "--verify", "--anchor", anchor)
	if r.code != cli.ExitChainBroken || !strings.Contains(r.errOut, "newest events were removed") {
		t.Errorf("truncation: %d %q", r.code, r.errOut)
	}
	// A whole chain rebuilt from scratch verifies on its own but not against the anchor.
	other := testenv.PrivateDir(t)
	seedAudit(t, other, ev("a", "b.c", audit.Allowed, time.Time{}), ev("a", "b.c", audit.Allowed, time.Time{}),
		ev("a", "b.c", audit.Allowed, time.Time{}), ev("a", "b.c", audit.Allowed, time.Time{}))
	r = runStoreCLI(t, other, "audit", "--verify", "--anchor", anchor)
	if r.code != cli.ExitChainBroken || !strings.Contains(r.errOut, "seq 4") || !strings.Contains(r.errOut, "rewritten") {
		t.Errorf("rewritten chain: %d %q", r.code, r.errOut)
	}
	for _, bad := range []string{"4", "x:" + hash, "0:" + hash, "4:abc", "4:" + strings.ToUpper(hash)} {
		if r := runStoreCLI(t, dir, "audit", "--verify", "--anchor", bad); r.code != 1 || !strings.Contains(r.errOut, "--anchor") {
			t.Errorf("--anchor %q: %d %q", bad, r.code, r.errOut)
		}
	}
	if r := runStoreCLI(t, dir, "audit", "--anchor", anchor); r.code != 1 {
		t.Errorf("--anchor without --verify accepted")
	}
}

func TestAuditRefuses(t *testing.T) {
	dir := standardAudit(t)
	for name, args := range map[string][]string{
		"verify with filter": {"--verify", "--principal", "alice"},
		"verify and follow":  {"--verify", "--follow"},
		"bad decision":       {"--decision", "maybe"},
		"bad since":          {"--since", "yesterday-ish"},
		"negative since":     {"--since", "-5m"},
		"negative limit":     {"--limit", "-1"},
		"tiny interval":      {"--follow", "--interval", "1ns"},
		"stray argument":     {"extra"},
	} {
		r := runStoreCLI(t, dir, append([]string{"audit"}, args...)...)
		if r.code == 0 || r.out != "" || r.errOut == "" {
			t.Errorf("%s: code %d, stdout %q, stderr %q", name, r.code, r.out, r.errOut)
		}
	}
}

func TestAuditTableEscapes(t *testing.T) {
	dir := testenv.PrivateDir(t)
	seedAudit(t, dir, &audit.Event{Principal: "evil\x1b[2J\nseq 99", Tool: "x.y\x00z", Decision: audit.Denied})
	r := runStoreCLI(t, dir, "audit")
	if strings.ContainsAny(r.out, "\x1b\x00") || strings.Count(r.out, "\n") != 2 {
		t.Errorf("table passes control characters:\n%q", r.out)
	}
	r = runStoreCLI(t, dir, "audit", "--json")
	var e audit.Event
	if err := json.Unmarshal([]byte(r.out), &e); err != nil || e.Principal != "evil\x1b[2J\nseq 99" || e.Tool != "x.y\x00z" {
		t.Errorf("JSON does not carry hostile values exactly: %+v %v", e, err)
	}
}

func TestAuditFollow(t *testing.T) {
	dir := standardAudit(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := newNotifyingBuffer()
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, []string{"--data-dir", dir, "audit", "--follow", "--json", "--interval", "10ms", "--principal", "carol"},
			cli.Stdio{In: strings.NewReader(""), Out: out, Err: out})
	}()
	// Nothing of carol's exists yet; append one of hers and one of someone else's.
	seedAudit(t, dir, ev("carol", "files.read", audit.Allowed, time.Time{}), ev("dave", "files.read", audit.Allowed, time.Time{}))
	got := out.waitFor(t, func(s string) bool { return strings.Contains(s, `"principal":"carol"`) })
	seedAudit(t, dir, ev("carol", "files.write", audit.Denied, time.Time{}))
	got = out.waitFor(t, func(s string) bool { return strings.Count(s, "\n") >= 2 })
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("follow exited %d after cancel: %s", code, out.String())
	}
	if seqs := fmt.Sprint(seqsOfJSONLines(t, out.String())); seqs != "[5 7]" {
		t.Errorf("followed seqs %s, want [5 7] (carol's only, each once); output:\n%s", seqs, got)
	}
}

func TestAuditFollowTable(t *testing.T) {
	dir := standardAudit(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := newNotifyingBuffer()
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, []string{"--data-dir", dir, "audit", "-f", "--interval", "10ms", "--limit", "1"},
			cli.Stdio{In: strings.NewReader(""), Out: out, Err: out})
	}()
	// The backlog is cut to one event by --limit; following starts at the head, so the
	// rest of the backlog is not printed later.
	out.waitFor(t, func(s string) bool { return strings.Count(s, "\n") >= 2 })
	seedAudit(t, dir, ev("erin", "files.read", audit.Allowed, time.Time{}))
	out.waitFor(t, func(s string) bool { return strings.Contains(s, "erin") })
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "SEQ") || !strings.HasPrefix(lines[1], "1 ") || !strings.HasPrefix(lines[2], "5 ") {
		t.Errorf("follow table:\n%s", out.String())
	}
}
