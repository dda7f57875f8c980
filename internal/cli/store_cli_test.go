package cli_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/cli"
)

// storeCLIResult is one in-process run of the command line.
type storeCLIResult struct {
	code        int
	out, errOut string
}

// runStoreCLI runs toolgate with --data-dir dir in-process, as the shell would.
func runStoreCLI(t *testing.T, dir string, args ...string) storeCLIResult {
	t.Helper()
	return runStoreCLIIn(t, context.Background(), dir, "", args...)
}

func runStoreCLIIn(t *testing.T, ctx context.Context, dir, stdin string, args ...string) storeCLIResult {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Run(ctx, append([]string{"--data-dir", dir}, args...),
		cli.Stdio{In: strings.NewReader(stdin), Out: &out, Err: &errOut})
	return storeCLIResult{code, out.String(), errOut.String()}
}

// notifyingBuffer is a goroutine-safe writer that signals each write, so a test can wait
// for output from a command running in another goroutine without sleeping.
type notifyingBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func newNotifyingBuffer() *notifyingBuffer {
	return &notifyingBuffer{wrote: make(chan struct{}, 1)}
}

func (b *notifyingBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	select {
	case b.wrote <- struct{}{}:
	default:
	}
	return n, err
}

func (b *notifyingBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor blocks until the buffer's content satisfies ok, or the test's deadline passes.
func (b *notifyingBuffer) waitFor(t *testing.T, ok func(string) bool) string {
	t.Helper()
	for {
		if s := b.String(); ok(s) {
			return s
		}
		select {
		case <-b.wrote:
		case <-t.Context().Done():
			t.Fatalf("output never matched; got:\n%s", b.String())
		}
	}
}
