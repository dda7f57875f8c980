package mcpserver

import (
	"net/http"
	"time"
)

// DefaultWriteTimeout bounds how long one write of an answer may wait for the
// client to take it (HandlerOptions.WriteTimeout, BridgeOptions.WriteTimeout;
// Guard applies it to every route of toolgate serve). The servers have no
// overall write timeout, because a long call's answer is written long after
// the request arrived; without a per-write bound, an answer to a client that
// never reads holds its goroutine, its request slot and its session forever.
// A client that reads at all takes 64 KiB within it easily.
const DefaultWriteTimeout = 30 * time.Second

// writeChunk is the most one write deadline covers: a large answer is written
// in chunks, each given the whole timeout, so the bound is on a client making
// no progress rather than on a slow one.
const writeChunk = 64 << 10

// deadlineWriter gives every write and flush of a response the write timeout
// from the moment it starts, through http.ResponseController (the connection's
// write deadline). The deadline is set anew before each write, so it never
// runs out while nothing is being written (a call that takes an hour) and is
// never pushed back while a write is stalled (a keep-alive cannot extend it:
// writes on a stream take turns, see sseStream). It is also set when the
// writer is made and at WriteHeader, which bounds what net/http writes on its
// own (a 100 Continue, the headers of a response without a body, the end of a
// chunked body).
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

// withWriteDeadline wraps w so that each write gets d; d <= 0 leaves w as it
// is. A writer already wrapped is rewrapped with d rather than stacked.
func withWriteDeadline(w http.ResponseWriter, d time.Duration) http.ResponseWriter {
	if dw, ok := w.(*deadlineWriter); ok {
		w = dw.ResponseWriter
	}
	if d <= 0 {
		return w
	}
	dw := &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: d}
	dw.arm()
	return dw
}

// arm sets the write deadline; a writer without a connection (a test's
// recorder) has none to set.
func (w *deadlineWriter) arm() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout)) }

func (w *deadlineWriter) WriteHeader(code int) {
	w.arm()
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c := min(len(p), writeChunk)
		w.arm()
		m, err := w.ResponseWriter.Write(p[:c])
		n += m
		if err != nil {
			return n, err
		}
		p = p[c:]
	}
	return n, nil
}

// FlushError flushes within the timeout (http.ResponseController.Flush uses it).
func (w *deadlineWriter) FlushError() error {
	w.arm()
	return w.rc.Flush()
}

func (w *deadlineWriter) Flush() { _ = w.FlushError() }

func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
