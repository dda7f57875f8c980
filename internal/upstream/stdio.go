package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// exitGrace is how long the end of stdout waits for the process's exit status
// (to report it as the cause), and how long the exit waits for stdout to drain
// (so answers written just before exiting are still delivered) before the
// connection ends anyway: a grandchild may hold stdout open for ever.
const exitGrace = 200 * time.Millisecond

// DialStdio opens the connection to a started stdio server and runs the
// handshake. A Process has at most one connection. The connection ends when the
// server's stdout ends or its process exits (the cause is then an
// *ExitedError); Close closes the server's stdin and stdout, and leaves
// stopping the process to Process.Stop.
func DialStdio(ctx context.Context, p *Process, opts Options) (*Conn, error) {
	if !p.dialed.CompareAndSwap(false, true) {
		return nil, errors.New("upstream: this process already has a connection")
	}
	if opts.Name == "" {
		opts.Name = p.name
	}
	c := newConn(opts)
	filter := newLineFilter(p.stdout, c.opts.MaxMessageBytes, c.log, &c.st)
	filter.onOversize = c.oversized
	filter.redact = p.redact
	// The filter enforces the size cap per line; the go-sdk's own cap counts
	// bytes its decoder reads ahead, so it is turned off rather than doubled.
	iot := &mcp.IOTransport{Reader: filter, Writer: p.stdin, MaxLineLength: -1}
	mconn, err := iot.Connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("upstream: connecting to %s: %w", p.name, err)
	}
	exitCause := func() (error, bool) {
		t := time.NewTimer(exitGrace)
		defer t.Stop()
		select {
		case <-p.exited:
			return &ExitedError{Status: p.status}, true
		case <-t.C:
			return nil, false
		}
	}
	// The end of the process ends the connection even while a grandchild keeps
	// stdout open.
	go func() {
		select {
		case <-p.exited:
		case <-c.done:
			return
		}
		t := time.NewTimer(exitGrace)
		defer t.Stop()
		select {
		case <-c.done:
		case <-t.C:
			c.closeWith(&ExitedError{Status: p.status})
		}
	}()
	err = c.start(ctx, transport{
		conn:   mconn,
		kind:   "stdio",
		serial: true,
		terminal: func(err error) bool {
			return filter.Failed() || errors.Is(err, io.EOF)
		},
		explain: func(err error) error {
			if cause, ok := exitCause(); ok {
				return cause
			}
			if errors.Is(err, io.EOF) {
				return errors.New("upstream: the server closed its stdout")
			}
			return err
		},
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}
