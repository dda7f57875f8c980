package mcpserver

import (
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// sseStream frames messages as server-sent events on one POST's response. It
// starts (status 200 and headers) with the first write.
//
// Writers take turns through a token rather than a mutex, so that one stalled
// write (bounded by the write deadline, see deadlineWriter) never has others
// queue behind it uninterruptibly: once a write failed, every waiting and later
// writer returns that failure at once, and a keep-alive that finds a write in
// progress skips its turn (that write is traffic already) instead of waiting.
type sseStream struct {
	w         http.ResponseWriter
	sessionID string
	// onFail, when set, is called once, by the first write that fails: the
	// client did not take the stream in time or went away.
	onFail func(error)

	token   chan struct{} // held by the one writer at a time
	started atomic.Bool
	failed  chan struct{} // closed at the first failed write
	once    sync.Once
	err     error // set before failed is closed
}

func newSSEStream(w http.ResponseWriter, sessionID string, onFail func(error)) *sseStream {
	return &sseStream{w: w, sessionID: sessionID, onFail: onFail, token: make(chan struct{}, 1), failed: make(chan struct{})}
}

// acquire takes the writer's turn; false (with the failure) when the stream
// failed before or while waiting.
func (s *sseStream) acquire() error {
	select {
	case <-s.failed:
		return s.err
	default:
	}
	select {
	case s.token <- struct{}{}:
		return nil
	case <-s.failed:
		return s.err
	}
}

func (s *sseStream) release() { <-s.token }

// fail records the first failed write and ends the stream for every writer.
func (s *sseStream) fail(err error) error {
	s.once.Do(func() {
		s.err = err
		close(s.failed)
		if s.onFail != nil {
			s.onFail(err)
		}
	})
	return err
}

// errStreamEnded is what a write after end returns.
var errStreamEnded = errors.New("the answer's stream has ended")

// end closes the stream to writers before its handler returns: net/http then
// finishes the response and frees its buffers, and a late writer — a
// notification of a call that outlives its request, such as an upstream's
// progress arriving after the client disconnected — must not touch it (it
// would write to a finished response, a nil-pointer panic in net/http that
// takes the daemon down). end waits for a write in progress, which the write
// deadline bounds; the turn is never given back.
func (s *sseStream) end() {
	select {
	case s.token <- struct{}{}:
		s.once.Do(func() {
			s.err = errStreamEnded
			close(s.failed)
		})
	case <-s.failed: // no writer uses w once the stream has failed
	}
}

func (s *sseStream) isStarted() bool { return s.started.Load() }

// start sends the status and headers now (once) and flushes them.
func (s *sseStream) start() error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.release()
	if s.started.Load() {
		return nil
	}
	s.startHeld()
	return s.flushHeld()
}

// startHeld writes the status and headers; the caller holds the turn.
func (s *sseStream) startHeld() {
	h := s.w.Header()
	if s.sessionID != "" {
		h.Set(headerSessionID, s.sessionID)
	}
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	// Tells nginx-style proxies not to buffer the stream, which would hold
	// back keep-alives and server requests alike.
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
	s.started.Store(true)
}

func (s *sseStream) flushHeld() error {
	if err := http.NewResponseController(s.w).Flush(); err != nil {
		return s.fail(err)
	}
	return nil
}

// writeHeld writes the parts of one event and flushes it; the caller holds the
// turn.
func (s *sseStream) writeHeld(parts ...[]byte) error {
	select {
	case <-s.failed:
		return s.err
	default:
	}
	if !s.started.Load() {
		s.startHeld()
	}
	for _, p := range parts {
		if _, err := s.w.Write(p); err != nil {
			return s.fail(err)
		}
	}
	return s.flushHeld()
}

// keepAliveLine is an SSE comment: clients ignore it, but it is traffic, so
// read-idle timeouts in clients and proxies do not fire during a long call.
var keepAliveLine = []byte(": keep-alive\n\n")

// keepAlive writes keepAliveLine every interval until the returned stop is
// called; stop waits for the writer to end, so nothing is written after it
// returns. interval <= 0 sends none. A failed write ends the keep-alives (and
// the answers after it fail the same way).
func (s *sseStream) keepAlive(interval time.Duration) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-s.failed:
				return
			case <-t.C:
				s.comment()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		<-exited
	}
}

// comment writes one keep-alive line unless another write holds the turn.
func (s *sseStream) comment() {
	select {
	case s.token <- struct{}{}:
	default:
		return
	}
	defer s.release()
	_ = s.writeHeld(keepAliveLine)
}

var (
	eventPrefix = []byte("event: message\ndata: ")
	eventEnd    = []byte("\n\n")
)

func (s *sseStream) send(msg []byte) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.release()
	// msg is compact JSON from rpcwire: it holds no raw newline, so one data line
	// carries it.
	return s.writeHeld(eventPrefix, msg, eventEnd)
}
