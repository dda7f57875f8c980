// Command conformance-client is the client the official MCP conformance
// suite judges (`conformance client --command conformance-client …`): the
// suite starts it with the scenario's server URL as its argument and the
// scenario in MCP_CONFORMANCE_SCENARIO (its data in MCP_CONFORMANCE_CONTEXT),
// plays the server and the authorization server, and scores what it sends.
//
// It makes each scenario's calls the way a harness does, through a real toolgate
// (through.go): the scenario's URL installed as a remote upstream of a fresh
// data directory, a headless sign-in (the suite's authorization servers redirect
// at once) where the scenario needs a person's, and the calls through `toolgate
// bridge --server conformance --stdio`. The binary is TOOLGATE_CONFORMANCE_TOOLGATE,
// else a toolgate beside this driver, else the one on PATH.
//
// TOOLGATE_CONFORMANCE_MODE=direct makes the same calls through toolgate's upstream
// client stack in this process instead (direct.go: internal/upstream, the stateless
// revision probed first, with internal/upstreamauth signing in headlessly), so the
// e2e test can tell the client stack's share of a failure from the host's.
//
// TOOLGATE_CONFORMANCE_LOG names a file the stack's log is appended to (through
// toolgate: each command's stderr and, at the end, the data directory's audit
// trail; the e2e test scans it for the suite's tokens); without it the log goes
// to stderr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"
)

// harness is what a scenario drives: the requests a harness makes of one
// upstream server. Results are the server's raw bytes.
type harness interface {
	Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	Close() error
}

// setup is what a scenario needs toolgate configured with.
type setup struct {
	scenario string
	context  map[string]any
}

func (s setup) str(key string) string {
	v, _ := s.context[key].(string)
	return v
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: conformance-client SERVER_URL (scenario in MCP_CONFORMANCE_SCENARIO)")
		os.Exit(2)
	}
	st := setup{scenario: os.Getenv("MCP_CONFORMANCE_SCENARIO"), context: map[string]any{}}
	if raw := os.Getenv("MCP_CONFORMANCE_CONTEXT"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &st.context); err != nil {
			fmt.Fprintln(os.Stderr, "conformance-client: MCP_CONFORMANCE_CONTEXT is not a JSON object")
			os.Exit(2)
		}
	}
	run, ok := scenarios[st.scenario]
	if !ok {
		fmt.Fprintf(os.Stderr, "conformance-client: scenario %q is not supported\n", st.scenario)
		os.Exit(1)
	}
	logw, log, closeLog := logger()
	defer closeLog()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	err := func() error {
		var h harness
		var err error
		if os.Getenv("TOOLGATE_CONFORMANCE_MODE") == "direct" {
			h, err = openDirect(ctx, os.Args[1], st, log)
		} else {
			h, err = openThrough(ctx, os.Args[1], st, logw, log)
		}
		if err != nil {
			return err
		}
		defer h.Close()
		return run(ctx, h, st)
	}()
	if err != nil {
		log.Error("scenario failed", "scenario", st.scenario, "error", err)
		fmt.Fprintf(os.Stderr, "conformance-client: %s: %v\n", st.scenario, err)
		closeLog()
		os.Exit(1)
	}
}

func logger() (io.Writer, *slog.Logger, func()) {
	path := os.Getenv("TOOLGATE_CONFORMANCE_LOG")
	if path == "" {
		return os.Stderr, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})), func() {}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance-client:", err)
		os.Exit(2)
	}
	return f, slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug})), func() { f.Close() }
}

var errUnsupported = errors.New("not supported by toolgate")
