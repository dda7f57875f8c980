package shelltool_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/internal/kernel"
	"github.com/toolgate/toolgate/internal/sandbox"
	"github.com/toolgate/toolgate/internal/shelltool"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/workspace"
)

func requireSandbox(t testing.TB) {
	t.Helper()
	if c := sandbox.Probe(); !c.Available {
		if testenv.RequirePeers() {
			t.Fatalf("sandbox unavailable on this machine: %s", c.Reason)
		}
		t.Skipf("sandbox unavailable: %s", c.Reason)
	}
}

func openWS(t testing.TB) *workspace.Workspace {
	t.Helper()
	ws, err := workspace.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

func bashTool(t testing.TB, ws *workspace.Workspace, opts shelltool.Options) *kernel.Tool {
	t.Helper()
	tools := shelltool.Tools(ws, opts)
	if len(tools) != 1 || tools[0].ID != "local.bash" {
		t.Fatalf("Tools = %v", tools)
	}
	return tools[0]
}

func call(t testing.TB, tool *kernel.Tool, args map[string]any) (*kernel.Output, error) {
	t.Helper()
	return tool.Run(context.Background(), &kernel.Call{ID: "c1", Principal: "default", Tool: tool, Args: args})
}

func mustRun(t testing.TB, tool *kernel.Tool, command string) (string, map[string]any) {
	t.Helper()
	out, err := call(t, tool, map[string]any{"command": command})
	if err != nil {
		t.Fatalf("bash %q: %v", command, err)
	}
	b, _ := json.Marshal(out.Structured)
	var m map[string]any
	json.Unmarshal(b, &m)
	return out.Text, m
}

// codeOf is the reason code the kernel reports for a tool's error.
func codeOf(err error) kernel.Code {
	if ke, ok := kernel.AsError(err); ok {
		return ke.Code
	}
	return ""
}

func marker(t testing.TB) string {
	b := make([]byte, 8)
	rand.Read(b)
	return "tgmark" + hex.EncodeToString(b)
}

func TestSchemaAnnotationsAndAccess(t *testing.T) {
	tool := bashTool(t, openWS(t), shelltool.Options{})
	c := jsonschema.NewCompiler()
	var doc any
	if err := json.Unmarshal(tool.InputSchema, &doc); err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("bash.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("bash.json")
	if err != nil {
		t.Fatalf("schema does not compile: %v", err)
	}
	for _, bad := range []string{`{}`, `{"command":""}`, `{"command":"ls","extra":1}`, `{"command":"ls","timeout_seconds":0}`, `{"command":"ls","timeout_seconds":601}`, `{"command":"ls","timeout_seconds":1.5}`} {
		var v any
		json.Unmarshal([]byte(bad), &v)
		if sch.Validate(v) == nil {
			t.Errorf("schema accepted %s", bad)
		}
	}
	var ok any
	json.Unmarshal([]byte(`{"command":"ls","timeout_seconds":5}`), &ok)
	if err := sch.Validate(ok); err != nil {
		t.Errorf("schema refused a valid call: %v", err)
	}
	if tool.Annotations.ReadOnly || !tool.Annotations.Destructive || tool.Annotations.OpenWorld == nil || *tool.Annotations.OpenWorld {
		t.Errorf("annotations = %+v", tool.Annotations)
	}
	acc, err := tool.Access(map[string]any{"command": "rm -rf /"})
	if err != nil || acc != (kernel.Access{Action: kernel.ActionExecute, Resource: "path:."}) {
		t.Errorf("Access = %+v, %v", acc, err)
	}
	if tool.Source != "toolgate" {
		t.Errorf("Source = %q", tool.Source)
	}
}

func TestRunsInWorkspaceWithOutput(t *testing.T) {
	requireSandbox(t)
	ws := openWS(t)
	text, m := mustRun(t, bashTool(t, ws, shelltool.Options{}), `pwd; echo oops >&2; exit 4`)
	if m["stdout"] != ws.Dir()+"\n" || m["stderr"] != "oops\n" || m["exit_code"] != float64(4) {
		t.Errorf("structured = %v", m)
	}
	if !strings.Contains(text, "[stderr]\noops") || !strings.HasSuffix(text, "[exit code 4]") {
		t.Errorf("text = %q", text)
	}
}

// TestNoSecretReachesTheChild sets toolgate-looking and secret-looking variables in this
// process and checks that none reaches the command, not even through /proc.
func TestNoSecretReachesTheChild(t *testing.T) {
	requireSandbox(t)
	secrets := map[string]string{
		"TOOLGATE_TOKEN":        "tg-tok-" + marker(t),
		"TOOLGATE_HOME":         "/secret/home/" + marker(t),
		"GITHUB_TOKEN":          "ghp-" + marker(t),
		"AWS_SECRET_ACCESS_KEY": "aws-" + marker(t),
		"OPENAI_API_KEY":        "sk-" + marker(t),
		"SSH_AUTH_SOCK":         "/tmp/ssh-" + marker(t),
		"BASH_ENV":              "/tmp/bashenv-" + marker(t),
		"LD_PRELOAD":            "/tmp/preload-" + marker(t),
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	text, _ := mustRun(t, bashTool(t, openWS(t), shelltool.Options{}),
		`env; echo ---; for f in /proc/[0-9]*/environ; do tr '\0' '\n' < "$f"; done 2>/dev/null; cat /proc/[0-9]*/cmdline 2>/dev/null`)
	for k, v := range secrets {
		if strings.Contains(text, v) {
			t.Errorf("%s reached the child", k)
		}
		if strings.Contains(text, k+"=") {
			t.Errorf("variable %s present in the child", k)
		}
	}
	for _, want := range []string{"PATH=", "HOME=", "TMPDIR=", "LANG=", "TERM=dumb"} {
		if !strings.Contains(text, want) {
			t.Errorf("%s missing from the child environment", want)
		}
	}
}

func TestNetworkUnreachable(t *testing.T) {
	requireSandbox(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	hits := make(chan struct{}, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case hits <- struct{}{}:
			default:
			}
			c.Close()
		}
	}()
	cmd := fmt.Sprintf(`(exec 3<>/dev/tcp/127.0.0.1/%d) && echo CONNECTED || echo refused`, ln.Addr().(*net.TCPAddr).Port)
	ws := openWS(t)
	text, _ := mustRun(t, bashTool(t, ws, shelltool.Options{}), cmd)
	if strings.Contains(text, "CONNECTED") {
		t.Errorf("bash reached a host listener without AllowInternet: %s", text)
	}
	select {
	case <-hits:
		t.Errorf("the listener saw a connection")
	default:
	}
	// Control: the same command connects when the internet is allowed.
	text, _ = mustRun(t, bashTool(t, ws, shelltool.Options{AllowInternet: true}), cmd)
	if !strings.Contains(text, "CONNECTED") {
		t.Errorf("with AllowInternet the listener should be reachable: %s", text)
	}
}

func TestWriteOutsideDeniedAndGitConfigReadOnly(t *testing.T) {
	requireSandbox(t)
	ws := openWS(t)
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws.Dir(), ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(ws.Dir(), ".git", "config")
	os.WriteFile(cfg, []byte("[core]\n"), 0o644)
	text, _ := mustRun(t, bashTool(t, ws, shelltool.Options{}), fmt.Sprintf(`
echo ok > inside.txt && echo WROTE-INSIDE
echo x > %s/out.txt && echo WROTE-OUTSIDE
echo x > "$HOME/h" && echo WROTE-HOME
printf '[core]\n\tfsmonitor = touch /tmp/pwn\n' > .git/config && echo WROTE-CONFIG
echo 'touch /tmp/pwn' > .git/hooks/pre-commit && echo WROTE-HOOK
true`, outside))
	for _, want := range []string{"WROTE-INSIDE", "WROTE-HOME"} {
		if !strings.Contains(text, want) {
			t.Errorf("%s missing: %s", want, text)
		}
	}
	for _, bad := range []string{"WROTE-OUTSIDE", "WROTE-CONFIG", "WROTE-HOOK"} {
		if strings.Contains(text, bad) {
			t.Errorf("%s: %s", bad, text)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "out.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file written outside the workspace")
	}
	if b, _ := os.ReadFile(cfg); string(b) != "[core]\n" {
		t.Errorf(".git/config changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(ws.Dir(), ".git", "hooks", "pre-commit")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("hook created")
	}
}

func procHasMarker(m string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && bytes.Contains(b, []byte(m)) {
			return true
		}
	}
	return false
}

func TestTimeoutKillsSetsidEscapees(t *testing.T) {
	requireSandbox(t)
	mark := marker(t)
	tool := bashTool(t, openWS(t), shelltool.Options{})
	done := make(chan error, 1)
	go func() {
		_, err := call(t, tool, map[string]any{
			"command":         fmt.Sprintf(`setsid bash -c 'exec -a %s sleep 1000' >/dev/null 2>&1 & sleep 1000`, mark),
			"timeout_seconds": float64(2),
		})
		done <- err
	}()
	for !procHasMarker(mark) {
		select {
		case err := <-done:
			t.Fatalf("call returned before the escaped process was seen: %v", err)
		default:
			time.Sleep(10 * time.Millisecond) // polling /proc, not synchronisation
		}
	}
	err := <-done
	if codeOf(err) != kernel.CodeTimeout {
		t.Errorf("err = %v, want code timeout", err)
	}
	if procHasMarker(mark) {
		t.Errorf("process %s survived the timeout", mark)
	}
}

func TestOutputCapMarker(t *testing.T) {
	requireSandbox(t)
	text, m := mustRun(t, bashTool(t, openWS(t), shelltool.Options{MaxOutput: 1000}), `yes abcdefgh`)
	if m["truncated"] != true || len(m["stdout"].(string)) != 1000 {
		t.Errorf("truncated=%v len=%d", m["truncated"], len(m["stdout"].(string)))
	}
	if !strings.Contains(text, "[output truncated: the 1000-byte cap was reached and the command was stopped]") {
		t.Errorf("no truncation marker in %q", text[len(text)-200:])
	}
}

func TestStdinEmptyAndFIFONeverBlocks(t *testing.T) {
	requireSandbox(t)
	ws := openWS(t)
	tool := bashTool(t, ws, shelltool.Options{})
	_, m := mustRun(t, tool, `cat; echo "bytes=$(cat | wc -c)"`)
	if m["stdout"] != "bytes=0\n" {
		t.Errorf("stdin not empty: %v", m)
	}
	if err := syscall.Mkfifo(filepath.Join(ws.Dir(), "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := call(t, tool, map[string]any{"command": "cat pipe", "timeout_seconds": float64(1)})
	if codeOf(err) != kernel.CodeTimeout {
		t.Errorf("FIFO read: err = %v, want timeout", err)
	}
}

func TestInvalidArguments(t *testing.T) {
	tool := bashTool(t, openWS(t), shelltool.Options{MaxTimeout: 10 * time.Second})
	for _, args := range []map[string]any{
		{},
		{"command": ""},
		{"command": 5},
		{"command": "a\x00b"},
		{"command": "true", "timeout_seconds": float64(11)},
		{"command": "true", "timeout_seconds": float64(1.5)},
		{"command": "true", "timeout_seconds": "3"},
	} {
		if _, err := call(t, tool, args); codeOf(err) != kernel.CodeInvalidArguments {
			t.Errorf("%v: err = %v, want invalid_arguments", args, err)
		}
	}
}

// TestRefusedWhenUserNamespacesBlocked re-runs this test binary inside a user namespace
// whose own limit on further user namespaces is zero, as on hosts that block them: the
// sandbox cannot be built there, and bash must refuse without running anything.
func TestRefusedWhenUserNamespacesBlocked(t *testing.T) {
	if os.Getenv("TOOLGATE_TEST_BLOCKED_USERNS") == "1" {
		blockedInner(t)
		return
	}
	requireSandbox(t)
	ws := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRefusedWhenUserNamespacesBlocked$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "TOOLGATE_TEST_BLOCKED_USERNS=1", "TOOLGATE_TEST_WS="+ws)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS")) || bytes.Contains(out, []byte("--- SKIP")) {
		t.Fatalf("inner run failed: %v\n%s", err, out)
	}
	t.Logf("inner run:\n%s", out)
	if _, err := os.Stat(filepath.Join(ws, "ran")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the command ran unconfined")
	}
}

func blockedInner(t *testing.T) {
	if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0\n"), 0); err != nil {
		t.Fatalf("cannot block user namespaces here: %v", err)
	}
	c := sandbox.Probe()
	if c.Available || c.UserNS {
		t.Fatalf("probe says available with user namespaces blocked: %+v", c)
	}
	ws, err := workspace.Open(os.Getenv("TOOLGATE_TEST_WS"))
	if err != nil {
		t.Fatal(err)
	}
	tool := bashTool(t, ws, shelltool.Options{})
	if !strings.Contains(tool.Description, "UNAVAILABLE") {
		t.Errorf("description does not say the sandbox is unavailable: %s", tool.Description)
	}
	_, err = call(t, tool, map[string]any{"command": "echo ran > ran"})
	if codeOf(err) != kernel.CodeSandboxUnavailable {
		t.Fatalf("err = %v, want sandbox_unavailable", err)
	}
	t.Logf("refused: %v", err)
}

func BenchmarkBashTrue(b *testing.B) {
	requireSandbox(b)
	tool := bashTool(b, openWS(b), shelltool.Options{})
	for b.Loop() {
		if _, err := call(b, tool, map[string]any{"command": "true"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBashTrueInATree is BenchmarkBashTrue in a workspace of 11,000 entries
// (1,000 directories of ten files), where the protected-path scans before and after
// the command read every directory.
func BenchmarkBashTrueInATree(b *testing.B) {
	requireSandbox(b)
	ws := openWS(b)
	for i := 0; i < 1000; i++ {
		d := filepath.Join(ws.Dir(), "pkg", fmt.Sprintf("m%02d", i/100), fmt.Sprintf("d%03d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		for j := 0; j < 10; j++ {
			os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d.go", j)), nil, 0o644)
		}
	}
	os.MkdirAll(filepath.Join(ws.Dir(), ".git", "objects"), 0o755)
	tool := bashTool(b, ws, shelltool.Options{})
	b.ResetTimer()
	for b.Loop() {
		if _, err := call(b, tool, map[string]any{"command": "true"}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestForkBombReportsProcessLimit(t *testing.T) {
	requireSandbox(t)
	if c := sandbox.Probe(); !strings.HasPrefix(c.ProcessLimit, "cgroup") {
		t.Skipf("no cgroup process limit on this machine: %s", c.ProcessLimit)
	}
	mark := marker(t)
	tool := bashTool(t, openWS(t), shelltool.Options{MaxProcesses: 64})
	text, m := mustRun(t, tool, `: `+mark+`
bomb() { bomb | bomb & }; bomb; wait; sleep 1000`)
	if m["limit_exceeded"] != "processes" {
		t.Errorf("structured = %v", m)
	}
	if !strings.Contains(text, "[process limit reached") {
		t.Errorf("text lacks the process-limit marker: %q", text)
	}
	if procHasMarker(mark) {
		t.Errorf("fork bomb processes survived the call")
	}
}

func TestEtcSecretsAndFileCap(t *testing.T) {
	requireSandbox(t)
	ws := openWS(t)
	tool := bashTool(t, ws, shelltool.Options{MaxFileSize: 1 << 20})
	text, m := mustRun(t, tool, `cat /etc/shadow >/dev/null 2>&1 && echo READ-SHADOW
cat /etc/passwd >/dev/null && echo passwd-ok
dd if=/dev/zero of=big bs=64k count=32 2>/dev/null; echo "dd $?"`)
	if strings.Contains(text, "READ-SHADOW") || !strings.Contains(text, "passwd-ok") {
		t.Errorf("/etc: %q", text)
	}
	if !strings.Contains(text, "dd 153") {
		t.Errorf("dd past the 1 MiB cap did not fail with SIGXFSZ: %q", text)
	}
	if _, ok := m["limit_exceeded"]; ok {
		t.Errorf("limit_exceeded set for an rlimit: %v", m)
	}
	if fi, err := os.Stat(filepath.Join(ws.Dir(), "big")); err != nil || fi.Size() != 1<<20 {
		t.Errorf("big: %v", err)
	}
}

func TestDescriptionStatesLimits(t *testing.T) {
	requireSandbox(t)
	tool := bashTool(t, openWS(t), shelltool.Options{MaxFileSize: 8 << 20})
	c := sandbox.Probe()
	for _, want := range []string{"no secrets under /etc", "every other mount is read-only", "protected paths (.git", "protected_path_changed", "processes: " + c.ProcessLimit, "memory: " + c.MemoryLimit, "files at most 8 MiB"} {
		if !strings.Contains(tool.Description, want) {
			t.Errorf("description lacks %q: %s", want, tool.Description)
		}
	}
}
