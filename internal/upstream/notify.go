package upstream

import (
	"encoding/json"
	"sync"
	"sync/atomic"
)

// DefaultNotificationQueue is how many upstream notifications wait for the
// handler before the oldest is dropped.
const DefaultNotificationQueue = 256

// Notification is a notification the upstream sent (other than progress and
// cancellation, which the connection routes itself).
type Notification struct {
	Method string
	// Params are the raw bytes the server sent (nil when it sent none).
	Params json.RawMessage
}

// noteQueue decouples the connection's reader from the notification handler:
// the reader never waits for the handler, and a server that floods
// notifications costs at most the queue's length, the oldest ones being
// dropped (and counted) first. A list_changed that is dropped is never the
// last one, since the newest are kept.
type noteQueue struct {
	mu      sync.Mutex
	ring    []Notification
	head, n int
	wake    chan struct{}
	dropped *atomic.Int64
}

func newNoteQueue(size int, dropped *atomic.Int64) *noteQueue {
	return &noteQueue{ring: make([]Notification, size), wake: make(chan struct{}, 1), dropped: dropped}
}

func (q *noteQueue) push(n Notification) {
	q.mu.Lock()
	if q.n == len(q.ring) {
		q.ring[q.head] = Notification{}
		q.head = (q.head + 1) % len(q.ring)
		q.n--
		q.dropped.Add(1)
	}
	q.ring[(q.head+q.n)%len(q.ring)] = n
	q.n++
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// pop removes the oldest queued notification.
func (q *noteQueue) pop() (Notification, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		return Notification{}, false
	}
	n := q.ring[q.head]
	q.ring[q.head] = Notification{}
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	return n, true
}

// run delivers notifications in arrival order until done is closed, then
// delivers what is still queued and returns. It takes one at a time, so a
// handler that is stuck holds one notification and the queue the rest.
func (q *noteQueue) run(handle func(Notification), done <-chan struct{}) {
	deliver := func() {
		for {
			n, ok := q.pop()
			if !ok {
				return
			}
			handle(n)
		}
	}
	for {
		select {
		case <-q.wake:
			deliver()
		case <-done:
			deliver()
			return
		}
	}
}
