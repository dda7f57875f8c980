package testenv

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Env is the environment for a spawned toolgate: this process's, with TOOLGATE_HOME
// set to data.
func Env(data string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TOOLGATE_HOME=") {
			out = append(out, kv)
		}
	}
	return append(out, "TOOLGATE_HOME="+data)
}

// Serve is one `toolgate serve` that StartServe started.
type Serve struct {
	Cmd    *exec.Cmd
	URL    string // its base URL, from its listening line
	Stderr *SyncBuffer
	// Done is closed once the process exited; Err is then what Wait returned.
	Done chan struct{}
	Err  error
}

var listenLine = regexp.MustCompile(`toolgate: listening on (http://\S+)`)

// StartServe runs `toolgate serve args...` over data and waits for its listening line.
// The process is killed when the test ends (its stderr logged if the test failed).
func StartServe(t testing.TB, data string, args ...string) *Serve {
	t.Helper()
	return StartServeEnv(t, data, nil, args...)
}

// StartServeEnv is StartServe with extra KEY=VALUE entries in the process's
// environment (after Env(data), so they win).
func StartServeEnv(t testing.TB, data string, env []string, args ...string) *Serve {
	t.Helper()
	s := &Serve{Stderr: &SyncBuffer{}, Done: make(chan struct{})}
	s.Cmd = exec.Command(Binary(t), append([]string{"serve"}, args...)...)
	s.Cmd.Env = append(Env(data), env...)
	pr, pw := io.Pipe()
	s.Cmd.Stderr = io.MultiWriter(s.Stderr, pw)
	if err := s.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.Err = s.Cmd.Wait()
		pw.Close()
		close(s.Done)
	}()
	t.Cleanup(func() {
		s.Cmd.Process.Kill()
		<-s.Done
		if t.Failed() {
			t.Logf("toolgate serve stderr:\n%s", s.Stderr.String())
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := listenLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, pr)
	}()
	select {
	case s.URL = <-found:
	case <-s.Done:
		t.Fatalf("serve exited before listening: %v\n%s", s.Err, s.Stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not start\n%s", s.Stderr.String())
	}
	return s
}

// Stop sends sig and waits for the process to exit, returning what Wait returned.
func (s *Serve) Stop(t testing.TB, sig syscall.Signal) error {
	t.Helper()
	s.Cmd.Process.Signal(sig)
	select {
	case <-s.Done:
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not exit after %v", sig)
	}
	return s.Err
}

// Run runs the toolgate CLI over data and returns its stdout, stderr and exit code.
func Run(t testing.TB, data string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	cmd.Env = Env(data)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}
