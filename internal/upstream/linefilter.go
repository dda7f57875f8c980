package upstream

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/bits"
	"sync/atomic"
)

// DefaultMaxMessageBytes caps one message from an upstream (one stdout line, one
// HTTP JSON body, one SSE event): 16 MiB, the go-sdk's own default line cap.
const DefaultMaxMessageBytes = 16 << 20

// lineFilter sits between a stdio server's stdout and the go-sdk's IOTransport.
// The transport decodes its input with a json.Decoder, and one byte that is not
// JSON ends the connection for good; servers print banners, npm prints notices,
// so the filter forwards only lines that are valid JSON objects or arrays, each
// with its newline, and drops (and counts) the rest. It also enforces the
// message cap: a longer line is never buffered, it is skimmed for its top-level
// "id" and "method" so the call it answers can fail, and dropped.
type lineFilter struct {
	r   *bufio.Reader
	src io.Closer
	max int
	log *slog.Logger
	st  *counters
	// onOversize is called (on the reading goroutine) for a dropped oversized
	// object that carried an id; isRequest says it also had a method.
	onOversize func(id json.RawMessage, isRequest bool)
	// redact removes known secrets from a dropped line before it is logged.
	redact func(string) string

	acc        []byte // a line longer than the reader's buffer, being gathered
	out        []byte // the current line, not yet handed out
	nl         bool   // the current line's newline is still owed
	pendingErr error  // the read error that followed a final unterminated line
	failed     atomic.Bool
}

func newLineFilter(src io.ReadCloser, max int, log *slog.Logger, st *counters) *lineFilter {
	return &lineFilter{r: bufio.NewReaderSize(src, 64<<10), src: src, max: max, log: log, st: st}
}

// Read hands out the accepted lines. Once it returns an error it has stopped
// for good (the decoder above it stops too), which Failed reports.
func (f *lineFilter) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for len(f.out) == 0 && !f.nl {
		if err := f.next(); err != nil {
			f.failed.Store(true)
			return 0, err
		}
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	if len(f.out) == 0 && f.nl && n < len(p) {
		p[n] = '\n'
		n++
		f.nl = false
	}
	return n, nil
}

func (f *lineFilter) Close() error { return f.src.Close() }

// Failed reports whether Read has returned an error, so a decode error the
// transport reports after it is the end of the stream, not one bad message.
func (f *lineFilter) Failed() bool { return f.failed.Load() }

// next reads the following line and accepts or drops it.
func (f *lineFilter) next() error {
	if err := f.pendingErr; err != nil {
		return err
	}
	f.acc = f.acc[:0]
	for {
		chunk, err := f.r.ReadSlice('\n')
		if len(f.acc)+len(chunk) > f.max+2 { // +2: the line's own "\r\n"
			f.skipOversize(chunk, err)
			return nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			f.acc = append(f.acc, chunk...)
			continue
		}
		line := chunk
		if len(f.acc) > 0 {
			f.acc = append(f.acc, chunk...)
			line = f.acc
		}
		if err != nil {
			f.pendingErr = err
		}
		// The +2 above lets a line's own terminator through; the message itself
		// (an unterminated last line included) is held to the cap.
		if len(bytes.TrimRight(line, "\r\n")) > f.max {
			var sc idScan
			sc.feed(line)
			f.dropOversize(len(line), &sc)
			return nil
		}
		f.accept(line)
		if err != nil && len(f.out) == 0 {
			return err
		}
		return nil
	}
}

func (f *lineFilter) accept(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	if (line[0] == '{' || line[0] == '[') && json.Valid(line) {
		f.out = line
		f.nl = true
		return
	}
	n := f.st.droppedLines.Add(1)
	if logWorthy(n) {
		// Redact before cutting, so no prefix of a secret survives the cut.
		text := string(line)
		if f.redact != nil {
			text = f.redact(text)
		}
		const show = 120
		if len(text) > show {
			text = text[:show]
		}
		f.log.Warn("upstream wrote a non-protocol line to stdout; dropped",
			"line", text, "bytes", len(line), "dropped_total", n)
	}
}

// skipOversize discards the rest of a line over the cap without holding it.
func (f *lineFilter) skipOversize(chunk []byte, err error) {
	var sc idScan
	sc.feed(f.acc)
	sc.feed(chunk)
	size := len(f.acc) + len(chunk)
	f.acc = f.acc[:0]
	for errors.Is(err, bufio.ErrBufferFull) {
		chunk, err = f.r.ReadSlice('\n')
		sc.feed(chunk)
		size += len(chunk)
	}
	if err != nil {
		f.pendingErr = err
	}
	f.dropOversize(size, &sc)
}

// dropOversize counts (and, thinned, logs) one message dropped for its size and
// reports its id, when it had one, so that only its own call fails.
func (f *lineFilter) dropOversize(size int, sc *idScan) {
	n := f.st.oversized.Add(1)
	if logWorthy(n) {
		f.log.Warn("upstream message over the size cap; dropped",
			"bytes", size, "limit", f.max, "oversized_total", n)
	}
	if id := sc.id(); id != nil && f.onOversize != nil {
		f.onOversize(id, sc.hasMethod)
	}
}

// logWorthy thins a repeated warning to the 1st, 2nd, 4th, 8th… occurrence, so
// a flood costs a logarithmic number of log lines.
func logWorthy(n int64) bool { return n > 0 && bits.OnesCount64(uint64(n)) == 1 }

// idScan follows a JSON object streamed through it in pieces and keeps only the
// raw value of its top-level "id" (bounded) and whether it has a top-level
// "method". It never buffers the object.
type idScan struct {
	started, ended, bad bool
	depth               int
	inStr, esc          bool
	expectKey, inKey    bool
	key                 []byte // the top-level key being read (short keys only)
	keyLong             bool
	curKey              string
	capturing           bool
	val                 []byte
	valLong             bool
	idVal               []byte
	hasMethod           bool
}

const idScanMaxValue = 64

func (s *idScan) feed(b []byte) {
	for _, c := range b {
		if s.ended || s.bad {
			return
		}
		s.step(c)
	}
}

func (s *idScan) step(c byte) {
	if !s.started {
		switch c {
		case ' ', '\t', '\r', '\n':
			return
		case '{':
			s.started, s.depth, s.expectKey = true, 1, true
			return
		}
		s.bad = true // not an object: nothing to find
		return
	}
	if s.inStr {
		switch {
		case s.esc:
			s.esc = false
		case c == '\\':
			s.esc = true
		case c == '"':
			s.inStr = false
			if s.inKey {
				s.inKey = false
				s.curKey = ""
				if !s.keyLong {
					s.curKey = string(s.key)
				}
				return
			}
			s.capture(c)
			return
		}
		if s.inKey {
			if len(s.key) < 8 {
				s.key = append(s.key, c)
			} else {
				s.keyLong = true
			}
			return
		}
		s.capture(c)
		return
	}
	switch c {
	case '"':
		s.inStr = true
		if s.depth == 1 && s.expectKey {
			s.inKey, s.expectKey, s.key, s.keyLong = true, false, s.key[:0], false
			return
		}
	case ':':
		if s.depth == 1 {
			switch s.curKey {
			case "id":
				s.capturing, s.val, s.valLong = true, s.val[:0], false
			case "method":
				s.hasMethod = true
			}
			return
		}
	case '{', '[':
		s.depth++
	case '}', ']':
		s.depth--
		if s.depth == 0 {
			s.finish()
			s.ended = true
			return
		}
	case ',':
		if s.depth == 1 {
			s.finish()
			s.expectKey = true
			return
		}
	case ' ', '\t', '\r', '\n':
		return
	}
	s.capture(c)
}

func (s *idScan) capture(c byte) {
	if !s.capturing {
		return
	}
	if len(s.val) < idScanMaxValue {
		s.val = append(s.val, c)
	} else {
		s.valLong = true
	}
}

func (s *idScan) finish() {
	if s.capturing {
		s.capturing = false
		if !s.valLong {
			s.idVal = append(s.idVal[:0], s.val...)
		}
	}
}

// id returns the raw top-level id, or nil when there was none (or it was too
// long to be one of ours).
func (s *idScan) id() json.RawMessage {
	if len(s.idVal) == 0 || !json.Valid(s.idVal) {
		return nil
	}
	return s.idVal
}
