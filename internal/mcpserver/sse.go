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
// called; stop waits for a write in progress to end, so nothing is written after
// it returns. interval <= 0 sends none. A failed write ends the keep-alives (and
// the answers after it fail the same way). The first keep-alive starts a stream
// that has not started yet (see claim). No goroutine waits in between: a timer
// runs each keep-alive, which a call that ends first never pays for.
func (s *sseStream) keepAlive(interval time.Duration) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	var (
		mu      sync.Mutex
		stopped bool
		t       *time.Timer
	)
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(interval, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		s.comment()
		select {
		case <-s.failed:
		default:
			t.Reset(interval)
		}
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
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

// errAnsweredWhole ends a stream that never started because its answer was
// written whole as JSON (see claim): a message sent after that has no stream.
var errAnsweredWhole = errors.New("the answer was written as JSON: no stream")

// claim decides how a POST's answers are written once its calls have ended: true
// when the stream started (a message or a keep-alive went first), so the answers
// follow as events on it; false when nothing was written, and then the stream is
// closed to every later writer and the caller writes the answers whole, as JSON.
func (s *sseStream) claim() bool {
	if err := s.acquire(); err != nil {
		return s.started.Load()
	}
	defer s.release()
	if s.started.Load() {
		return true
	}
	s.once.Do(func() {
		s.err = errAnsweredWhole
		close(s.failed)
	})
	return false
}

func (s *sseStream) send(msg []byte) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.release()
	// msg is compact JSON from rpcwire: it holds no raw newline, so one data line
	// carries it.
	return s.writeHeld(eventPrefix, msg, eventEnd)
}
