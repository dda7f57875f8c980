package upstream_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// toolText calls a fixture tool and returns its first text content.
func toolText(t *testing.T, c *upstream.Conn, name string, args string) string {
	t.Helper()
	if args == "" {
		args = "{}"
	}
	res, err := c.Call(testCtx(t), "tools/call", json.RawMessage(`{"name":"`+name+`","arguments":`+args+`}`))
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(res, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("tools/call %s: result %s", name, res)
	}
	return r.Content[0].Text
}

func TestEnvironmentIsDeclaredPlusBase(t *testing.T) {
	t.Setenv("TOOLGATE_CANARY", "canary-4f1c9e")
	t.Setenv("HOME", "/home/base-home")
	spec, marker := upstreamtest.Spec(t)
	spec.Env = map[string]string{"DECLARED": "declared-value", "HOME": "/declared/home"}
	c, _, _ := dialSpec(t, spec, marker, upstream.Options{})

	var env []string
	if err := json.Unmarshal([]byte(toolText(t, c, "env", "")), &env); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	if got["DECLARED"] != "declared-value" {
		t.Errorf("declared variable missing: %v", env)
	}
	if got["HOME"] != "/declared/home" {
		t.Errorf("HOME = %q, want the declared value to override the base", got["HOME"])
	}
	if got["PATH"] != os.Getenv("PATH") {
		t.Errorf("PATH = %q, want the base value %q", got["PATH"], os.Getenv("PATH"))
	}
	allowed := map[string]bool{"DECLARED": true}
	for _, n := range upstream.BaseEnvNames {
		allowed[n] = true
	}
	for k := range got {
		if !allowed[k] {
			t.Errorf("server inherited %s, which is neither declared nor base", k)
		}
	}
	for _, kv := range env {
		if strings.Contains(kv, "canary-4f1c9e") {
			t.Errorf("toolgate's environment leaked into the server: %s", kv)
		}
	}
}

func TestEmptyBaseEnv(t *testing.T) {
	spec, marker := upstreamtest.Spec(t)
	spec.BaseEnv = []string{}
	spec.Env = map[string]string{"ONLY": "1"}
	c, _, _ := dialSpec(t, spec, marker, upstream.Options{})
	if got := toolText(t, c, "env", ""); got != `["ONLY=1"]` {
		t.Errorf("environment = %s, want only the declared variable", got)
	}
}

func TestCommandLookedUpInServerPath(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink(upstreamtest.Fixture(t), filepath.Join(dir, "my-mcp-server")); err != nil {
		t.Fatal(err)
	}
	spec, marker := upstreamtest.Spec(t)
	spec.Command = "my-mcp-server"
	spec.Env = map[string]string{"PATH": dir}
	c, _, _ := dialSpec(t, spec, marker, upstream.Options{})
	if got := toolText(t, c, "echo", `{"text":"found"}`); got != "found" {
		t.Errorf("echo = %q", got)
	}
}

func TestRelativeCommandAndDir(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "srv", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(upstreamtest.Fixture(t), filepath.Join(root, "srv", "bin", "server")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	spec, marker := upstreamtest.Spec(t)
	spec.Command, spec.Dir = "./bin/server", "srv"
	c, _, _ := dialSpec(t, spec, marker, upstream.Options{})
	if got := toolText(t, c, "echo", `{"text":"relative"}`); got != "relative" {
		t.Errorf("echo = %q", got)
	}
}

func TestStartErrorsNameNoSecret(t *testing.T) {
	secretArg, secretEnv := "SECRET-ARG-7d2", "SECRET-ENV-91b"
	cases := []upstream.Spec{
		{Name: "gh", Command: "/nonexistent/server", Args: []string{"--token", secretArg}, Env: map[string]string{"TOKEN": secretEnv}},
		{Name: "gh", Command: "not-a-command-anywhere", Args: []string{secretArg}, Env: map[string]string{"PATH": t.TempDir(), "TOKEN": secretEnv}},
		{Name: "gh", Command: upstreamtest.Fixture(t), Args: []string{secretArg}, Env: map[string]string{"BAD=NAME": secretEnv}},
		{Name: "gh", Command: upstreamtest.Fixture(t), Env: map[string]string{"TOKEN": secretEnv + "\x00"}},
		{Name: "gh", Command: upstreamtest.Fixture(t), Args: []string{secretArg}, Dir: "/nonexistent/dir"},
		{Name: "gh", Command: ""},
	}
	for i, spec := range cases {
		p, err := upstream.Start(spec)
		if err == nil {
			p.Kill()
			t.Errorf("case %d: Start succeeded", i)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "SECRET") {
			t.Errorf("case %d: error reveals a secret: %s", i, msg)
		}
		if !strings.Contains(msg, "gh") {
			t.Errorf("case %d: error does not name the server: %s", i, msg)
		}
	}
}

func TestStopEscalation(t *testing.T) {
	cases := []struct {
		name  string
		args  []string
		check func(upstream.ExitStatus) bool
	}{
		{"exits on stdin EOF", nil, func(s upstream.ExitStatus) bool { return s.Code == 0 && s.Signal == 0 }},
		{"needs SIGTERM", []string{"-ignore-eof"}, func(s upstream.ExitStatus) bool { return s.Signal == syscall.SIGTERM }},
		{"needs SIGKILL", []string{"-ignore-eof", "-ignore-term"}, func(s upstream.ExitStatus) bool { return s.Signal == syscall.SIGKILL }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, p, marker := dial(t, upstream.Options{}, tc.args...)
			toolText(t, c, "echo", `{"text":"up"}`)
			if err := p.Stop(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			st, ok := p.ExitStatus()
			if !ok || !tc.check(st) {
				t.Errorf("exit status %v (%v)", st, ok)
			}
			if pids := upstreamtest.Processes(t, marker); len(pids) != 0 {
				t.Errorf("alive after Stop: %v", pids)
			}
			select {
			case <-c.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("connection still open after the process stopped")
			}
			var exited *upstream.ExitedError
			if !errors.As(c.Err(), &exited) {
				t.Errorf("connection ended with %v, want an *ExitedError", c.Err())
			}
		})
	}
}

// pids returns the fixture's pid and its grandchild's.
func pids(t *testing.T, c *upstream.Conn) (pid, grandchild int) {
	var r struct{ Pid, Pgid, Grandchild int }
	if err := json.Unmarshal([]byte(toolText(t, c, "pids", "")), &r); err != nil {
		t.Fatal(err)
	}
	if r.Pgid != r.Pid {
		t.Errorf("fixture pgid %d != pid %d: not its own process group", r.Pgid, r.Pid)
	}
	return r.Pid, r.Grandchild
}

func TestStopKillsWholeTree(t *testing.T) {
	c, p, marker := dial(t, upstream.Options{}, "-grandchild")
	pid, gc := pids(t, c)
	if pid != p.Pid() || gc == 0 {
		t.Fatalf("pids: %d %d (process %d)", pid, gc, p.Pid())
	}
	if n := len(upstreamtest.Processes(t, marker)); n != 2 {
		t.Fatalf("%d processes with the marker, want the server and its grandchild", n)
	}
	if err := p.Stop(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if pids := upstreamtest.Processes(t, marker); len(pids) != 0 {
		t.Errorf("alive after Stop returned: %v (grandchild %d ignores SIGTERM)", pids, gc)
	}
}

func TestCrashTakesTheGroupWithIt(t *testing.T) {
	c, p, marker := dial(t, upstream.Options{}, "-grandchild")
	_, gc := pids(t, c)
	_, err := c.Call(testCtx(t), "tools/call", json.RawMessage(`{"name":"crash","arguments":{"code":7}}`))
	var exited *upstream.ExitedError
	if !errors.Is(err, upstream.ErrClosed) || !errors.As(err, &exited) || exited.Status.Code != 7 {
		t.Fatalf("call on a crashing server: %v", err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("process group not cleaned up after the leader crashed")
	}
	if pids := upstreamtest.Processes(t, marker); len(pids) != 0 {
		t.Errorf("left behind by the crash: %v (grandchild %d)", pids, gc)
	}
}

func TestStopHonoursContext(t *testing.T) {
	spec, marker := upstreamtest.Spec(t, "-ignore-eof", "-ignore-term")
	spec.StopGrace = time.Hour
	p := upstreamtest.Start(t, spec, marker)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := p.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop = %v, want the context's error", err)
	}
	select {
	case <-p.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the group was not killed when Stop's context ended")
	}
	if st, _ := p.ExitStatus(); st.Signal != syscall.SIGKILL {
		t.Errorf("exit status %v, want SIGKILL", st)
	}
}

func TestStderrTailIsBounded(t *testing.T) {
	const flood = 8 << 20
	c, p, _ := dial(t, upstream.Options{}, "-stderr-flood", strconv.Itoa(flood))
	toolText(t, c, "stderr", `{"bytes":1000000}`) // and more while calls run
	if got := toolText(t, c, "echo", `{"text":"still here"}`); got != "still here" {
		t.Fatalf("echo = %q", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.StderrBytes() < flood+1000000 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if p.StderrBytes() < flood+1000000 {
		t.Fatalf("only %d stderr bytes read", p.StderrBytes())
	}
	tail := p.StderrTail()
	if len(tail) > upstream.DefaultStderrTailBytes {
		t.Errorf("tail is %d bytes, over the %d bound", len(tail), upstream.DefaultStderrTailBytes)
	}
	if n := strings.Count(tail, "\n"); n > upstream.DefaultStderrTailLines {
		t.Errorf("tail has %d lines, over the %d bound", n, upstream.DefaultStderrTailLines)
	}
	if !strings.HasSuffix(tail, "stderr-end\n") || !strings.HasPrefix(tail, "stderr line ") {
		t.Errorf("tail is not the last whole lines: %q…%q", tail[:40], tail[len(tail)-40:])
	}
}

// TestParentDeathKillsServer starts the fixture from a helper process, kills
// the helper with SIGKILL (no chance to stop anything) and expects the kernel
// to kill the fixture.
func TestParentDeathKillsServer(t *testing.T) {
	marker := upstreamtest.Marker(t)
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), helperEnv+"=orphan:"+upstreamtest.Fixture(t)+":"+marker)
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	helper.Stderr = os.Stderr
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		helper.Process.Kill()
		t.Fatalf("helper: %v", err)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(line))
	t.Cleanup(func() {
		if len(upstreamtest.Processes(t, marker)) > 0 {
			syscall.Kill(child, syscall.SIGKILL) // the test failed: do not leak it
		}
	})
	if pids := upstreamtest.Processes(t, marker); len(pids) != 1 || pids[0] != child {
		t.Fatalf("fixture not running under the helper: %v (helper said %d)", pids, child)
	}
	helper.Process.Signal(syscall.SIGKILL)
	helper.Wait()
	upstreamtest.WaitGone(t, marker, 10*time.Second)
}

func TestOneConnectionPerProcess(t *testing.T) {
	_, p, _ := dial(t, upstream.Options{})
	if _, err := upstream.DialStdio(testCtx(t), p, upstream.Options{}); err == nil {
		t.Fatal("a second connection on one process's pipes was allowed")
	}
}
