package shelltool_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/shelltool"
)

// The command used to be bash's -c argument, in /proc/PID/cmdline, which every user of
// the host can read (ps -eo args). Now no process's argv holds it during the call.
// Control: a marker the command builds at run time and puts in sleep's argv is seen, so
// the scan does see the call's processes.
func TestCommandNotInAnyArgv(t *testing.T) {
	requireSandbox(t)
	secret := marker(t)
	visible := marker(t)
	// The visible marker is assembled by printf, so the command's text never holds it.
	// bash stays (waiting), so its own argv would show the command if it held it.
	command := fmt.Sprintf(`token=%s
(exec -a "$(printf '%%s' %s %s)" sleep 60) & wait`, secret, visible[:8], visible[8:])
	tool := bashTool(t, openWS(t), shelltool.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := tool.Run(ctx, &kernel.Call{ID: "c1", Principal: "default", Tool: tool, Args: map[string]any{"command": command}})
		done <- err
	}()
	for !procHasMarker(visible) {
		select {
		case err := <-done:
			t.Fatalf("the call ended before its process was seen: %v", err)
		default:
			if procHasMarker(secret) {
				t.Fatalf("the command's text is in a process's argv")
			}
			time.Sleep(5 * time.Millisecond) // polling /proc, not synchronisation
		}
	}
	if procHasMarker(secret) {
		t.Errorf("the command's text is in a process's argv")
	}
	cancel()
	<-done
}

// bash -c semantics survive the command travelling on a descriptor: $0, positional
// parameters, exit status, line numbers, BASH_EXECUTION_STRING, traps; the
// descriptor itself is closed before the command runs; stdin stays empty.
func TestBashSemanticsKept(t *testing.T) {
	requireSandbox(t)
	tool := bashTool(t, openWS(t), shelltool.Options{})
	for _, c := range []struct{ cmd, stdout string }{
		{`echo "$0 $# $-"`, "/bin/bash 0 hBc\n"},
		{"echo $LINENO\n\necho $LINENO", "1\n3\n"},
		{`echo "$BASH_EXECUTION_STRING"`, "echo \"$BASH_EXECUTION_STRING\"\n"},
		{`ls /proc/$$/fd >fds; tr '\n' ' ' <fds`, "0 1 2 "},
		{`trap 'echo bye' EXIT; echo hi`, "hi\nbye\n"},
		{`declare -p C 2>/dev/null || echo unset`, "unset\n"},
		{"shopt -s extglob\necho @(a|b)x", "@(a|b)x\n"},
		{`cat; echo "n=$(wc -c)"`, "n=0\n"},
		{"echo a\nfi\necho b", "a\n"},
	} {
		_, m := mustRun(t, tool, c.cmd)
		if m["stdout"] != c.stdout {
			t.Errorf("%q: stdout %q, want %q (stderr %q)", c.cmd, m["stdout"], c.stdout, m["stderr"])
		}
	}
	_, m := mustRun(t, tool, "false; exit 7")
	if m["exit_code"] != float64(7) {
		t.Errorf("exit status = %v", m["exit_code"])
	}
	_, m = mustRun(t, tool, "echo a\nfi")
	if m["exit_code"] != float64(2) || !strings.Contains(m["stderr"].(string), "line 2: syntax error near unexpected token `fi'") {
		t.Errorf("syntax error: %v", m)
	}
}

// Through the tool: metadata of files outside the workspace cannot be changed (chmod
// 4777 or 0777, touch -d, user and security xattrs, setcap, mknod, hard links out), nor that
// of the system's files and mount points, while the same commands work in the
// workspace and on its own root directory; protected paths (.git whole, internal/protect)
// stay read-only, metadata included.
func TestMetadataOutsideWorkspaceRefusedInBash(t *testing.T) {
	requireSandbox(t)
	ws := openWS(t)
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("v\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws.Dir(), ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(ws.Dir(), ".git", "config")
	if err := os.WriteFile(cfg, []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var before unix.Stat_t
	if err := unix.Stat(victim, &before); err != nil {
		t.Fatal(err)
	}
	xattr := `python3 -c 'import os,sys; os.setxattr(sys.argv[1], sys.argv[2], b"\x01\x00\x00\x02" + bytes(16))'`
	tool := bashTool(t, ws, shelltool.Options{})
	text, _ := mustRun(t, tool, fmt.Sprintf(`v=%[1]s
echo in > in.txt
chmod 777 in.txt && echo CTL-chmod
cp /bin/true suid && chmod 4755 suid && echo BAD-setuid-inside
chmod g+s . && echo BAD-setgid-dir
touch -d 2001-01-01 in.txt && echo CTL-touch
%[2]s in.txt user.x && echo CTL-xattr
mkfifo fifo && echo CTL-mkfifo
chmod 700 . && chmod 755 . && touch -d 2001-01-01 . && echo CTL-wsroot
chmod 700 .git && echo BAD-git-mode
chmod 4777 "$v" && echo BAD-chmod
chown 0:0 "$v" && echo BAD-chown
touch -d 2001-01-01 "$v" && echo BAD-touch
%[2]s "$v" user.x && echo BAD-xattr
%[2]s "$v" security.capability && echo BAD-fcaps
/usr/sbin/setcap cap_net_raw+ep "$v" 2>/dev/null && echo BAD-setcap
cp /bin/true t && /usr/sbin/setcap cap_net_raw+ep t 2>/dev/null && echo BAD-setcap-inside
%[2]s t security.capability && echo BAD-fcaps-inside
mknod "$(dirname "$v")/fifo" p && echo BAD-mknod
ln "$v" hard && echo BAD-link-in
ln in.txt "$(dirname "$v")/out" && echo BAD-link-out
truncate -s 0 "$v" && echo BAD-truncate
chmod 644 .git/config && echo BAD-config
chmod 755 .. && echo BAD-wsparent
for p in / /tmp /etc/passwd /dev/null /dev /proc /sys /usr/bin/env; do chmod "$(stat -c %%a "$p")" "$p" && echo "BAD-sys-$p"; done
for p in /proc/sys/kernel/core_pattern /sys/kernel/mm/transparent_hugepage/enabled; do [ -e "$p" ] && { : >> "$p"; } 2>/dev/null && echo "BAD-write-$p"; done
true`, victim, xattr))
	for _, want := range []string{"CTL-chmod", "CTL-touch", "CTL-xattr", "CTL-mkfifo", "CTL-wsroot"} {
		if !strings.Contains(text, want) {
			t.Errorf("control %s failed: %s", want, text)
		}
	}
	if strings.Contains(text, "BAD-") {
		t.Errorf("a metadata change outside the workspace succeeded:\n%s", text)
	}
	var after unix.Stat_t
	if err := unix.Stat(victim, &after); err != nil {
		t.Fatal(err)
	}
	if after.Mode != before.Mode || after.Mtim != before.Mtim || after.Size != before.Size || after.Nlink != 1 {
		t.Errorf("outside file changed: mode %o→%o mtime %v→%v size %d→%d links %d", before.Mode, after.Mode, before.Mtim, after.Mtim, before.Size, after.Size, after.Nlink)
	}
	if n, _ := unix.Listxattr(victim, make([]byte, 256)); n > 0 {
		t.Errorf("outside file got extended attributes")
	}
	if b, _ := os.ReadFile(cfg); !bytes.Equal(b, []byte("[core]\n")) {
		t.Errorf(".git/config changed: %q", b)
	}
	var in unix.Stat_t
	if err := unix.Stat(filepath.Join(ws.Dir(), "in.txt"), &in); err != nil || in.Mode&0o7777 != 0o777 || in.Uid != uint32(os.Getuid()) {
		t.Errorf("control: in.txt on the host: mode %o uid %d (%v), want 777 owned by toolgate's uid", in.Mode&0o7777, in.Uid, err)
	}
}
