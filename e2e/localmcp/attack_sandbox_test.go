package localmcp

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Attacks on the bash sandbox's edges through the real binary: metadata of host files
// (Landlock governs data, not chmod, chown, utimes or xattrs) and the command's text
// in the host's process list.

// bash changed the metadata of files outside the workspace: the set-uid bit and mode
// 0777 on a file beside the workspace (and could plant a set-uid copy of a shell in
// it, owned by root on the host), its times, a user xattr, the parent directory's
// mode, and (values unchanged, so the host is not harmed if it regresses) the modes of
// /, /usr/bin/env and /dev/null. Every one is refused now, the host files are as
// they were, and the same commands work in the workspace.
func TestAttackBashChangesHostMetadata(t *testing.T) {
	w := newWorld(t)
	secret := filepath.Join(w.parent, "secret")
	var before, parentBefore unix.Stat_t
	if err := unix.Stat(secret, &before); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(w.parent, &parentBefore); err != nil {
		t.Fatal(err)
	}
	s := w.start(t)
	r := s.call(pBash, map[string]any{"command": `chmod 0777 README.md && touch -d 2001-01-01 README.md && echo CTL-inside
cp /bin/sh sh && chmod 4755 sh && echo BAD-setuid-in-workspace
chmod 4777 ../secret && echo BAD-chmod
touch -d 2001-01-01 ../secret && echo BAD-touch
python3 -c 'import os; os.setxattr("../secret", "user.pwned", b"1")' && echo BAD-xattr
chmod 0777 .. && echo BAD-parent
for p in / /usr/bin/env /dev/null; do chmod "$(stat -c %a "$p")" "$p" && echo "BAD-sys-$p"; done
true`})
	if r.isError || !strings.Contains(r.text, "CTL-inside") {
		t.Fatalf("control: metadata of a workspace file could not be changed: %+v", r)
	}
	if strings.Contains(r.text, "BAD-") {
		t.Errorf("bash changed metadata outside the workspace:\n%s", r.text)
	}
	var after, parentAfter unix.Stat_t
	if err := unix.Stat(secret, &after); err != nil {
		t.Fatal(err)
	}
	if after.Mode != before.Mode || after.Mtim != before.Mtim {
		t.Errorf("%s changed: mode %o→%o mtime %v→%v", secret, before.Mode, after.Mode, before.Mtim, after.Mtim)
	}
	if n, _ := unix.Listxattr(secret, make([]byte, 256)); n > 0 {
		t.Errorf("%s got an extended attribute", secret)
	}
	if err := unix.Stat(w.parent, &parentAfter); err != nil || parentAfter.Mode != parentBefore.Mode {
		t.Errorf("the workspace's parent changed: mode %o→%o (%v)", parentBefore.Mode, parentAfter.Mode, err)
	}
	var readme unix.Stat_t
	if err := unix.Stat(filepath.Join(w.ws, "README.md"), &readme); err != nil || readme.Mode&0o7777 != 0o777 {
		t.Errorf("control: README.md mode %o on the host (%v), want 777", readme.Mode&0o7777, err)
	}
	var sh unix.Stat_t
	if err := unix.Stat(filepath.Join(w.ws, "sh"), &sh); err == nil && sh.Mode&0o6000 != 0 {
		t.Errorf("a set-uid copy of a shell was planted in the workspace: mode %o", sh.Mode&0o7777)
	}
	w.unchanged(t)
}

// The command was bash's -c argument, so any user of the host saw it (ps -eo args,
// /proc/PID/cmdline) while it ran: a token or a private path in it was exposed. Now
// no process's argv holds it. Control: a marker the command assembles at run time into
// sleep's argv is seen, so the scan sees the call's processes.
func TestAttackBashCommandInHostArgv(t *testing.T) {
	w := newWorld(t)
	s := w.start(t)
	hidden, visible := randomMark(t), randomMark(t)
	done := make(chan result, 1)
	go func() {
		done <- s.call(pBash, map[string]any{"timeout_seconds": 3, "command": "TOKEN=" + hidden +
			"\n(exec -a \"$(printf '%s' " + visible[:8] + " " + visible[8:] + ")\" sleep 30) & wait"})
	}()
	for !argvHas(visible) {
		select {
		case r := <-done:
			t.Fatalf("the call ended before its process was seen: %+v", r)
		default:
		}
		if argvHas(hidden) {
			t.Fatal("the command's text is in a host process's argv")
		}
		time.Sleep(5 * time.Millisecond) // polling /proc, not synchronisation
	}
	if argvHas(hidden) {
		t.Error("the command's text is in a host process's argv")
	}
	<-done
}

func randomMark(t *testing.T) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "tgmark" + hex.EncodeToString(b)
}

// argvHas reports whether any process on the host has m in its argv.
func argvHas(m string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && bytes.Contains(b, []byte(m)) {
			return true
		}
	}
	return false
}
