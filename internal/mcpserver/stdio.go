package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/toolgate/toolgate/internal/mcpspec"
	"github.com/toolgate/toolgate/internal/rpcwire"
)

// StdioOptions configures ServeStdio.
type StdioOptions struct {
	ServerInfo   mcpspec.Implementation
	Instructions string
	// Logger receives failures; it must not write to the protocol stream. Nil
	// discards.
	Logger *slog.Logger
	// MaxMessageBytes caps one input line (default rpcwire.MaxMessageBytes). A
	// longer line is skipped without being buffered and answered -32700.
	MaxMessageBytes int
	// NoStateless turns off the stateless 2026-07-28 revision, which is
	// otherwise served beside the session-based versions (server/discover,
	// per-request _meta, input_required instead of server-to-client requests).
	// A client that picks it (the Go SDK does, first) has no elicitation through
	// Peer, so the tools must ask through input_required (ask_user does); off,
	// such a client falls back to initialize.
	NoStateless bool
}

// maxQueuedLines bounds the lines read but not yet answered; reading pauses at
// the bound, so a client that floods the input cannot grow memory without end.
const maxQueuedLines = 256

// ServeStdio serves MCP as newline-delimited JSON: messages from r, answers to
// w. Calls run concurrently but answers are written in arrival order, so the
// order a harness observes is the order the audit trail shows. Only protocol
// messages are written to w. Both eras are served on the one stream: a request
// with 2026-07-28 _meta (or server/discover) statelessly, anything else in the
// session an initialize opened. In that session a tool may send a
// server-to-client request (for example elicitation/create) through the call's
// Peer when the client declared the capability at initialize.
//
// ServeStdio returns nil when r ends (after answering everything read), or the
// context's error once it is cancelled (calls in flight are cancelled first). The
// goroutine blocked reading r ends when r returns; the caller owns r and turn.
func ServeStdio(ctx context.Context, r io.Reader, w io.Writer, turn Turn, opts StdioOptions) error {
	if turn == nil {
		return errors.New("mcpserver: ServeStdio needs a Turn")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	max := opts.MaxMessageBytes
	if max <= 0 {
		max = rpcwire.MaxMessageBytes
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := newConn(turn, opts.ServerInfo, opts.Instructions, logger, !opts.NoStateless)

	var (
		wmu      sync.Mutex
		writeErr error
	)
	writeLine := func(b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		if writeErr != nil {
			return writeErr
		}
		buf := make([]byte, 0, len(b)+1)
		buf = append(append(buf, b...), '\n')
		if _, err := w.Write(buf); err != nil {
			writeErr = fmt.Errorf("writing to the client: %w", err)
			cancel()
			return writeErr
		}
		return nil
	}
	peer := peerFunc{c: c, send: writeLine}
	stopWatch := watchStdio(ctx, c, writeLine)
	defer func() { cancel(); stopWatch() }()

	type slot struct {
		done   chan struct{}
		answer []byte
	}
	slots := make(chan *slot, maxQueuedLines)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for s := range slots {
			<-s.done
			if s.answer != nil {
				_ = writeLine(s.answer)
			}
		}
	}()

	lines := make(chan lineResult)
	quit := make(chan struct{})
	go readLines(r, max, lines, quit)

	var calls sync.WaitGroup
	limits := rpcwire.Limits{MaxBytes: max}
	var result error
loop:
	for {
		var lr lineResult
		select {
		case <-ctx.Done():
			break loop
		case lr = <-lines:
		}
		if lr.err != nil {
			if !errors.Is(lr.err, io.EOF) {
				result = fmt.Errorf("reading from the client: %w", lr.err)
			}
			break
		}
		s := &slot{done: make(chan struct{})}
		if lr.tooLong {
			s.answer = rpcwire.Error(jsonrpc.ID{}, rpcwire.ParseError(fmt.Sprintf("message is larger than %d bytes", max)))
		} else if len(bytes.TrimSpace(lr.line)) == 0 {
			continue
		} else {
			body, rpcErr := limits.Decode(bytes.TrimRight(lr.line, "\r\n"))
			switch {
			case rpcErr != nil:
				s.answer = rpcwire.Error(jsonrpc.ID{}, rpcErr)
			default:
				// Decided here, in arrival order, so that a request is admitted
				// or refused knowing every initialize before it.
				run := c.begin(body.Items, body.Batch)
				if !run.pending() {
					// Notifications, answers to our requests, initialize and
					// refusals: nothing left to run.
					if s.answer = joinAnswers(run.answers, body.Batch); s.answer == nil {
						continue
					}
					break
				}
				// The slot is queued before the calls start, so every call that
				// starts is answered, even when cancelled.
				select {
				case slots <- s:
				case <-ctx.Done():
					break loop
				}
				calls.Add(1)
				go func() {
					defer calls.Done()
					defer close(s.done)
					answers, _ := run.run(ctx, peer)
					s.answer = joinAnswers(answers, body.Batch)
				}()
				continue
			}
		}
		close(s.done)
		select {
		case slots <- s:
		case <-ctx.Done():
			break loop
		}
	}
	close(quit)
	if ctx.Err() != nil {
		c.close()
	} else {
		// Input ended: nobody can answer a server-to-client request any more,
		// but calls in flight finish and are answered.
		c.failPending()
	}
	calls.Wait()
	close(slots)
	<-writerDone
	c.close()
	wmu.Lock()
	werr := writeErr
	wmu.Unlock()
	switch {
	case werr != nil:
		return werr
	case result != nil:
		return result
	}
	return context.Cause(ctx)
}

// joinAnswers writes the non-nil answers as one line: an array for a batch, the
// single answer otherwise; nil when there is nothing to answer.
func joinAnswers(answers [][]byte, batch bool) []byte {
	var out [][]byte
	for _, a := range answers {
		if a != nil {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil
	}
	if !batch {
		return out[0]
	}
	return append(append([]byte("["), bytes.Join(out, []byte(","))...), ']')
}

type lineResult struct {
	line    []byte
	tooLong bool
	err     error
}

// readLines reads newline-delimited messages. A line longer than max is skipped
// in chunks (never held whole) and reported as tooLong.
func readLines(r io.Reader, max int, out chan<- lineResult, quit <-chan struct{}) {
	br := bufio.NewReaderSize(r, 64<<10)
	send := func(lr lineResult) bool {
		select {
		case out <- lr:
			return true
		case <-quit:
			return false
		}
	}
	for {
		var line []byte
		tooLong := false
		for {
			chunk, err := br.ReadSlice('\n')
			if !tooLong {
				if len(line)+len(chunk) > max+2 { // +2: the line end, "\n" or "\r\n"
					tooLong = true
					line = nil
				} else {
					line = append(line, chunk...)
				}
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if err != nil {
				if len(line) > 0 || tooLong {
					if !send(lineResult{line: line, tooLong: tooLong}) {
						return
					}
				}
				send(lineResult{err: err})
				return
			}
			break
		}
		if !send(lineResult{line: line, tooLong: tooLong}) {
			return
		}
	}
}
