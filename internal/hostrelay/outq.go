package hostrelay

import (
	"context"
	"sync"
	"sync/atomic"
)

// outq holds what the host will write to one client, in the order it was queued:
// responses, which are never dropped (at most Limits.MaxInFlight of them plus the
// relay's own refusals, because the connection's reader waits for room), and
// notifications (progress, events), at most Limits.NotificationQueue, the oldest
// dropped when full. A dropped event makes a resync due, which the writer sends first
// with a fresh snapshot. Nothing that queues here ever waits for the client, so the
// host's goroutines (the upstream's reader calling Progress, the host's observer) are
// never held up by a client that does not read.
type outq struct {
	mu       sync.Mutex
	seq      uint64
	resp     []outItem
	notes    []outItem // notes[nhead:] are queued
	nhead    int
	maxNotes int
	maxResp  int
	resync   bool
	closed   bool

	wake  chan struct{}
	space chan struct{}

	droppedProgress *atomic.Uint64
	droppedEvents   *atomic.Uint64
}

type outItem struct {
	seq   uint64
	line  []byte
	event bool
}

func newOutq(maxNotes, maxResp int, droppedProgress, droppedEvents *atomic.Uint64) *outq {
	return &outq{
		maxNotes: maxNotes, maxResp: maxResp,
		wake: make(chan struct{}, 1), space: make(chan struct{}, 1),
		droppedProgress: droppedProgress, droppedEvents: droppedEvents,
	}
}

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// pushResp queues a response line.
func (q *outq) pushResp(line []byte) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.seq++
	q.resp = append(q.resp, outItem{seq: q.seq, line: line})
	q.mu.Unlock()
	poke(q.wake)
}

// pushNote queues a notification line, dropping the oldest one when the queue is full.
func (q *outq) pushNote(line []byte, event bool) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	if len(q.notes)-q.nhead >= q.maxNotes {
		old := q.notes[q.nhead]
		q.notes[q.nhead] = outItem{}
		q.nhead++
		if old.event {
			q.droppedEvents.Add(1)
			q.resync = true
		} else {
			q.droppedProgress.Add(1)
		}
	}
	if q.nhead > 0 && (q.nhead == len(q.notes) || q.nhead >= q.maxNotes) {
		n := copy(q.notes, q.notes[q.nhead:])
		clear(q.notes[n:])
		q.notes, q.nhead = q.notes[:n], 0
	}
	q.seq++
	q.notes = append(q.notes, outItem{seq: q.seq, line: line, event: event})
	q.mu.Unlock()
	poke(q.wake)
}

// requestResync makes a resync due: the writer sends a fresh snapshot before anything
// else it writes next.
func (q *outq) requestResync() {
	q.mu.Lock()
	q.resync = true
	q.mu.Unlock()
	poke(q.wake)
}

// take removes everything queued, in queue order, and says whether a resync is due.
func (q *outq) take(buf []outItem) ([]outItem, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	resp, notes := q.resp, q.notes[q.nhead:]
	for len(resp) > 0 || len(notes) > 0 {
		if len(notes) == 0 || (len(resp) > 0 && resp[0].seq < notes[0].seq) {
			buf = append(buf, resp[0])
			resp = resp[1:]
		} else {
			buf = append(buf, notes[0])
			notes = notes[1:]
		}
	}
	clear(q.resp)
	clear(q.notes)
	q.resp, q.notes, q.nhead = q.resp[:0], q.notes[:0], 0
	resync := q.resync
	q.resync = false
	poke(q.space)
	return buf, resync
}

// waitRoom blocks while the responses waiting to be written are at the cap; false
// when ctx ended first.
func (q *outq) waitRoom(ctx context.Context) bool {
	for {
		q.mu.Lock()
		full := len(q.resp) >= q.maxResp && !q.closed
		q.mu.Unlock()
		if !full {
			return true
		}
		select {
		case <-q.space:
		case <-ctx.Done():
			return false
		}
	}
}

func (q *outq) close() {
	q.mu.Lock()
	q.closed = true
	q.resp, q.notes = nil, nil
	q.mu.Unlock()
	poke(q.space)
}
