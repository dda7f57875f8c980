package upstream

import (
	"bytes"
	"io"
	"sync"
)

// Default bounds of the stderr tail a Process keeps.
const (
	DefaultStderrTailBytes = 64 << 10
	DefaultStderrTailLines = 200
)

// tail keeps the last maxBytes bytes written to it (and, when read, at most the
// last maxLines lines of those), so a server that floods stderr costs a fixed
// amount of memory. Writes are O(1) amortised: the buffer grows to twice the
// bound and is then cut back to the bound.
type tail struct {
	maxBytes, maxLines int

	mu    sync.Mutex
	buf   []byte
	cut   bool  // bytes before buf were discarded
	total int64 // bytes ever written
}

func newTail(maxBytes, maxLines int) *tail {
	if maxBytes <= 0 {
		maxBytes = DefaultStderrTailBytes
	}
	if maxLines <= 0 {
		maxLines = DefaultStderrTailLines
	}
	return &tail{maxBytes: maxBytes, maxLines: maxLines}
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += int64(len(p))
	if len(p) >= t.maxBytes {
		t.buf = append(t.buf[:0], p[len(p)-t.maxBytes:]...)
		t.cut = true
		return len(p), nil
	}
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.maxBytes {
		n := copy(t.buf, t.buf[len(t.buf)-t.maxBytes:])
		t.buf = t.buf[:n]
		t.cut = true
	}
	return len(p), nil
}

// String returns the tail: whole lines only once anything was discarded.
func (t *tail) String() string {
	t.mu.Lock()
	b := t.buf
	cut := t.cut
	if len(b) > t.maxBytes {
		b = b[len(b)-t.maxBytes:]
		cut = true
	}
	b = bytes.Clone(b)
	t.mu.Unlock()
	if cut {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	// Keep the last maxLines lines (a final line without a newline counts).
	n := 0
	end := len(b)
	if end > 0 && b[end-1] == '\n' {
		end--
	}
	for i := end - 1; i >= 0; i-- {
		if b[i] == '\n' {
			n++
			if n == t.maxLines {
				b = b[i+1:]
				break
			}
		}
	}
	return string(b)
}

func (t *tail) Total() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total
}

// drain copies r into t until r ends.
func (t *tail) drain(r io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			t.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}
