package serve

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/store/storetest"
)

// invokeWrite calls local.write_file for rel and returns the result's code ("" when it
// succeeded) and whether the answer was a tool result at all.
func invokeWrite(t *testing.T, d *daemon, tok, rel string) (code string, status int) {
	t.Helper()
	body := fmt.Sprintf(`{"name":"local.write_file","arguments":{"path":%q,"content":"x"}}`, rel)
	status, _, b := request(t, "POST", d.url+"/v1/tools/invoke", tok, body)
	if status != 200 {
		var e struct{ Error string }
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			t.Fatalf("status %d with an undocumented body %q", status, b)
		}
		return e.Error, status
	}
	var r struct {
		IsError bool
		Content []struct{ Text string }
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("status 200 with a body that is no result: %q", b)
	}
	if !r.IsError {
		return "", status
	}
	var f struct{ Code string }
	if len(r.Content) > 0 {
		json.Unmarshal([]byte(r.Content[0].Text), &f)
	}
	return f.Code, status
}

// tmpfs mounts a small tmpfs for the test (root only: the faults need a file system
// whose size and mode the test controls). It is unmounted at the end.
func tmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// A full disk under the audit log refuses every call audit_unavailable and runs
// nothing, the daemon stays up, and calls succeed again once there is room; the chain
// verifies and every file written has its event.
func TestStoreFullRefusesAndRecovers(t *testing.T) {
	mnt := tmpfs(t, "3m")
	data := filepath.Join(mnt, "data")
	ws := workspaceDir(t)
	d := startServe(t, data, ws)
	tok := d.ownerToken()
	if code, _ := invokeWrite(t, d, tok, "before.txt"); code != "" {
		t.Fatalf("a call before the disk filled: %q", code)
	}
	filler := filepath.Join(mnt, "filler")
	fillDisk(t, filler)
	refused := 0
	for i := range 200 {
		code, status := invokeWrite(t, d, tok, fmt.Sprintf("full/%d.txt", i))
		switch code {
		case "":
		case "audit_unavailable":
			refused++
		default:
			t.Fatalf("call %d on a full disk: status %d code %q", i, status, code)
		}
	}
	if refused == 0 {
		t.Fatal("no call was refused on a full disk: the test did not exercise it")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if code, _ := invokeWrite(t, d, tok, "after.txt"); code != "" {
		t.Fatalf("a call after room came back: %q", code)
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("serve after a full disk: %v\n%s", err, d.stderr.String())
	}
	checkEveryFileAudited(t, data, ws)
	// The outage is logged thinned, with its count, and its end once.
	log := d.stderr.String()
	if n := strings.Count(log, "audit: append failed"); n == 0 || n > 12 {
		t.Errorf("%d log lines for %d refusals; want a handful (1st, 2nd, 4th…)", n, refused)
	}
	if !strings.Contains(log, "audit: appends succeed again") {
		t.Errorf("the end of the outage was not logged:\n%s", log)
	}
	t.Logf("%d of 200 calls refused on the full disk", refused)
}

// fillDisk writes until the file system is full.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// checkEveryFileAudited fails for any file under ws (but the seeded ones and the
// dot-named temporary files of interrupted atomic writes) without an allowed
// write_file event, and when the chain does not verify. It returns the number of
// allowed write_file events.
func checkEveryFileAudited(t *testing.T, data, ws string) int {
	t.Helper()
	evs := storetest.Trail(t, data)
	if err := audit.Verify(evs); err != nil {
		t.Errorf("the chain does not verify: %v", err)
	}
	allowed := map[string]bool{}
	for _, e := range evs {
		if e.Decision == audit.Allowed && e.Tool == "local.write_file" {
			allowed[e.Resource] = true
		}
	}
	filepath.WalkDir(ws, func(p string, de os.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(ws, p)
		if rel == "docs/a.md" || rel == "src/x.go" || strings.HasPrefix(de.Name(), ".") {
			return nil
		}
		if !allowed["path:"+rel] {
			t.Errorf("%s was written without an allowed audit event", rel)
		}
		return nil
	})
	return len(allowed)
}

// A data directory on a read-only file system stops serve at start, saying so.
func TestReadOnlyStoreRefusesToStart(t *testing.T) {
	mnt := tmpfs(t, "3m")
	data := filepath.Join(mnt, "data")
	if _, errOut, code := run(t, data, "grant", "ls"); code != 0 {
		t.Fatalf("creating the data directory: %s", errOut)
	}
	if out, err := exec.Command("mount", "-o", "remount,ro", mnt).CombinedOutput(); err != nil {
		t.Fatalf("remount ro: %v %s", err, out)
	}
	defer exec.Command("mount", "-o", "remount,rw", mnt).Run()
	_, errOut, code := run(t, data, "serve", "--listen", "127.0.0.1:0")
	if code == 0 || !strings.Contains(errOut, "read-only file system") || !strings.Contains(errOut, data) {
		t.Errorf("serve on a read-only data directory: exit %d, %q", code, errOut)
	}
}

// A data directory removed under a running daemon refuses calls clearly, runs nothing,
// and the daemon neither crashes nor hangs: it still answers and stops on SIGTERM.
func TestDataDirectoryRemovedWhileRunning(t *testing.T) {
	data, _ := setup(t, nil)
	ws := workspaceDir(t)
	d := startServe(t, data, ws)
	tok := d.ownerToken()
	if code, _ := invokeWrite(t, d, tok, "before.txt"); code != "" {
		t.Fatalf("before: %q", code)
	}
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		code, status := invokeWrite(t, d, tok, fmt.Sprintf("gone%d.txt", i))
		if code == "" {
			t.Fatalf("a call with the data directory gone succeeded (status %d)", status)
		}
		if code != "catalog_unavailable" && code != "audit_unavailable" {
			t.Errorf("call %d: status %d, code %q; want a documented refusal", i, status, code)
		}
		if _, err := os.Stat(filepath.Join(ws, fmt.Sprintf("gone%d.txt", i))); err == nil {
			t.Errorf("gone%d.txt was written with no audit trail to record it", i)
		}
	}
	if status, _, _ := request(t, "GET", d.url+"/v1/tools", tok, ""); status == 0 {
		t.Error("the daemon stopped answering")
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Errorf("serve after its data directory was removed: %v\n%s", err, d.stderr.String())
	}
	if strings.Contains(d.stderr.String(), "panic") {
		t.Errorf("serve panicked:\n%s", d.stderr.String())
	}
}

// Another process holding the SQLite write lock: a call waits for it up to the busy
// timeout (10 s, docs/storage.md) and then runs; held longer, the calls waiting are
// refused audit_unavailable and nothing runs; released, calls succeed again.
func TestSQLiteBusy(t *testing.T) {
	data, _ := setup(t, nil)
	ws := workspaceDir(t)
	d := startServe(t, data, ws)
	tok := d.ownerToken()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(data, "toolgate.db")+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	hold := func(d time.Duration) (release func()) {
		tx, err := db.Begin() // BEGIN IMMEDIATE: the write lock, held until Rollback
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		timer := time.AfterFunc(d, func() { tx.Rollback(); close(done) })
		return func() {
			if timer.Stop() {
				tx.Rollback()
				close(done)
			}
			<-done
		}
	}
	// Held briefly: the call waits and runs.
	release := hold(time.Second)
	if code, _ := invokeWrite(t, d, tok, "short.txt"); code != "" {
		t.Errorf("a call behind a 1 s lock: %q", code)
	}
	release()
	// Held past the busy timeout: refused, nothing runs.
	release = hold(time.Minute)
	var wg sync.WaitGroup
	codes := make([]string, 1)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _ = invokeWrite(t, d, tok, fmt.Sprintf("busy%d.txt", i))
		}()
	}
	wg.Wait()
	release()
	for i, c := range codes {
		if c != "audit_unavailable" {
			t.Errorf("call %d behind a lock held past the busy timeout: %q", i, c)
		}
		if _, err := os.Stat(filepath.Join(ws, fmt.Sprintf("busy%d.txt", i))); err == nil {
			t.Errorf("busy%d.txt was written without its event", i)
		}
	}
	if code, _ := invokeWrite(t, d, tok, "after.txt"); code != "" {
		t.Errorf("a call after the lock was released: %q", code)
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	checkEveryFileAudited(t, data, ws)
}
