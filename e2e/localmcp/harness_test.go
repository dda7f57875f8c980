package localmcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testenv"
)

// server is one running `toolgate mcp` and the SDK session driving it.
type server struct {
	t       *testing.T
	session *mcp.ClientSession
	stderr  *testenv.SyncBuffer
	asked   []string
}

// startArgs spawns the binary with exactly these arguments (after the binary name) and
// an environment whose TMPDIR is private to the test.
func startArgs(t *testing.T, env []string, command string, args ...string) *server {
	t.Helper()
	return startClient(t, true, env, command, args...)
}

// startClient is startArgs with a choice of whether the client supports elicitation.
func startClient(t *testing.T, elicit bool, env []string, command string, args ...string) *server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	s := &server{t: t, stderr: &testenv.SyncBuffer{}}
	cmd := exec.Command(command, args...)
	cmd.Env = env
	cmd.Stderr = s.stderr
	opts := &mcp.ClientOptions{}
	if elicit {
		opts.ElicitationHandler = func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			s.asked = append(s.asked, req.Params.Message)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "answer to: " + req.Params.Message}}, nil
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "localmcp-e2e", Version: "1"}, opts)
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to %s %v: %v\nstderr:\n%s", command, args, err, s.stderr.String())
	}
	s.session = session
	t.Cleanup(func() {
		session.Close()
		if t.Failed() {
			t.Logf("toolgate stderr:\n%s", s.stderr.String())
		}
	})
	return s
}

// baseEnv is the environment for every spawned binary: the test's own, with TMPDIR and
// TOOLGATE_HOME private to the test.
func baseEnv(t *testing.T) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "TMPDIR=") || strings.HasPrefix(kv, "TOOLGATE_HOME=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "TMPDIR="+t.TempDir(), "TOOLGATE_HOME="+filepath.Join(t.TempDir(), "home"))
}

func start(t *testing.T, args ...string) *server {
	t.Helper()
	return startArgs(t, baseEnv(t), testenv.Binary(t), append([]string{"mcp"}, args...)...)
}

func (s *server) names() []string {
	s.t.Helper()
	res, err := s.session.ListTools(context.Background(), nil)
	if err != nil {
		s.t.Fatalf("tools/list: %v", err)
	}
	var n []string
	for _, tl := range res.Tools {
		n = append(n, tl.Name)
	}
	sort.Strings(n)
	return n
}

// result is a tool result reduced to what the tests check.
type result struct {
	text    string
	isError bool
	status  string
	code    string
}

func (s *server) call(name string, args map[string]any) result {
	s.t.Helper()
	res, err := s.session.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		s.t.Fatalf("tools/call %s: %v", name, err)
	}
	var r result
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			r.text += tc.Text
		}
	}
	r.isError = res.IsError
	if res.Meta != nil {
		r.status, _ = res.Meta["toolgate/status"].(string)
		r.code, _ = res.Meta["toolgate/code"].(string)
	}
	return r
}

// ok calls a tool that must succeed and returns its text.
func (s *server) ok(name string, args map[string]any) string {
	s.t.Helper()
	r := s.call(name, args)
	if r.isError {
		s.t.Fatalf("%s %v failed: %s", name, args, r.text)
	}
	return r.text
}

// refused calls a tool that must be refused with code.
func (s *server) refused(name string, args map[string]any, code string) result {
	s.t.Helper()
	r := s.call(name, args)
	if !r.isError || r.code != code {
		s.t.Errorf("%s %q: got isError=%v code=%q text=%q; want code %s", name, args, r.isError, r.code, r.text, code)
	}
	return r
}

// rawLines runs the binary with stdin fed from lines and returns every stdout line;
// used to prove that stdout carries JSON-RPC and nothing else.
func rawLines(t *testing.T, env []string, args []string, in []string) (stdout []string, stderr string) {
	t.Helper()
	cmd := exec.Command(testenv.Binary(t), args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(strings.Join(in, "\n") + "\n")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v\nstderr:\n%s", args, err, errb.String())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		stdout = append(stdout, sc.Text())
	}
	return stdout, errb.String()
}

func mustJSONLine(t *testing.T, line string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil || m["jsonrpc"] != "2.0" {
		t.Errorf("stdout line is not JSON-RPC: %q", line)
	}
	return m
}
