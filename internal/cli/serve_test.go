package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/kernel"
)

// waitWriter collects output and lets a test wait for a pattern without sleeping.
type waitWriter struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{}
}

func newWaitWriter() *waitWriter { return &waitWriter{changed: make(chan struct{})} }

func (w *waitWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	close(w.changed)
	w.changed = make(chan struct{})
	return len(p), nil
}

// wait returns the first submatch of re once the output contains it.
func (w *waitWriter) wait(t *testing.T, re *regexp.Regexp, done <-chan error) string {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		w.mu.Lock()
		m := re.FindStringSubmatch(w.b.String())
		ch := w.changed
		w.mu.Unlock()
		if m != nil {
			return m[len(m)-1]
		}
		select {
		case <-ch:
		case err := <-done:
			t.Fatalf("serve returned %v before %s:\n%s", err, re, w.String())
		case <-timeout:
			t.Fatalf("no %s in:\n%s", re, w.String())
		}
	}
}

func (w *waitWriter) String() string { w.mu.Lock(); defer w.mu.Unlock(); return w.b.String() }

// SIGTERM (the context main cancels) stops accepting, lets the in-flight call finish
// and answer, then serve returns cleanly.
func TestServeDrainsInFlightCalls(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	testTools = []*kernel.Tool{{
		ID: "local.hold", InputSchema: json.RawMessage(`{"type":"object"}`),
		Run: func(ctx context.Context, _ *kernel.Call) (*kernel.Output, error) {
			close(started)
			<-release
			return &kernel.Output{Text: "finished after shutdown began"}, nil
		},
	}}
	defer func() { testTools = nil }()

	data := filepath.Join(t.TempDir(), "data")
	errw := newWaitWriter()
	env := &Env{Stdio: Stdio{In: strings.NewReader(""), Out: io.Discard, Err: errw}, dataDir: data}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, env, serveFlags{listen: "127.0.0.1:0", drain: time.Minute}) }()
	url := errw.wait(t, regexp.MustCompile(`listening on (http://\S+)`), done)
	tok, err := os.ReadFile(filepath.Join(data, "owner-token"))
	if err != nil {
		t.Fatal(err)
	}

	type answer struct {
		status int
		body   string
		err    error
	}
	answered := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("POST", url+"/v1/tools/invoke", strings.NewReader(`{"name":"local.hold"}`))
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		answered <- answer{status: resp.StatusCode, body: string(b)}
	}()
	<-started
	stop() // what SIGTERM does in main
	errw.wait(t, regexp.MustCompile(`shutting down`), done)
	close(release)
	a := <-answered
	if a.err != nil || a.status != 200 || !strings.Contains(a.body, "finished after shutdown began") {
		t.Errorf("in-flight call across shutdown: %+v", a)
	}
	if err := <-done; err != nil {
		t.Errorf("serve returned %v", err)
	}
	if !strings.Contains(errw.String(), "toolgate: stopped") {
		t.Errorf("no clean stop:\n%s", errw.String())
	}
	if _, err := http.Get(url + "/healthz"); err == nil {
		t.Errorf("still accepting after shutdown")
	}
}
