package upstream_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// helperEnv, when set, makes the test binary a helper process instead of
// running tests: "orphan:FIXTURE:MARKER" starts the fixture as an upstream,
// prints its pid and waits to be killed.
const helperEnv = "UPSTREAM_TEST_HELPER"

func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(runHelper(h))
	}
	os.Exit(m.Run())
}

func runHelper(h string) int {
	mode, rest, _ := strings.Cut(h, ":")
	switch mode {
	case "orphan":
		fixture, marker, _ := strings.Cut(rest, ":")
		// -ignore-eof: the helper's death closes the fixture's stdin; only the
		// parent-death signal may end it.
		p, err := upstream.Start(upstream.Spec{Command: fixture, Args: []string{"-marker", marker, "-ignore-eof", "-ignore-term"}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		// Wait until the fixture is serving, so it has nothing left to write
		// (a write to the dead helper's pipes would kill it with SIGPIPE).
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := upstream.DialStdio(ctx, p, upstream.Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := c.Ping(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(p.Pid())
		time.Sleep(time.Hour)
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown helper", h)
	return 2
}

// dial starts the fixture with args and opens a connection to it; both are
// stopped, and the marker checked gone, when the test ends.
func dial(t testing.TB, opts upstream.Options, args ...string) (*upstream.Conn, *upstream.Process, string) {
	t.Helper()
	spec, marker := upstreamtest.Spec(t, args...)
	return dialSpec(t, spec, marker, opts)
}

func dialSpec(t testing.TB, spec upstream.Spec, marker string, opts upstream.Options) (*upstream.Conn, *upstream.Process, string) {
	t.Helper()
	p := upstreamtest.Start(t, spec, marker)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := upstream.DialStdio(ctx, p, opts)
	if err != nil {
		t.Fatalf("DialStdio: %v (stderr: %s)", err, p.StderrTail())
	}
	t.Cleanup(func() { c.Close() })
	return c, p, marker
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newLogger(w *bytes.Buffer, mu *sync.Mutex) *slog.Logger {
	return slog.New(slog.NewTextHandler(lockedWriter{w, mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// awaitCancelled waits for a cancelled call's error, which must come at once.
func awaitCancelled(t testing.TB, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled call returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled call did not return")
	}
}
