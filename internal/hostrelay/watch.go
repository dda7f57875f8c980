package hostrelay

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/toolgate/toolgate/internal/host"
)

// sink receives a source's events (the local host's, or those a relay connection
// brings). Both methods are called on the source's own goroutine and must not block.
type sink interface {
	// event is a host.ServerEvent, host.StateEvent or host.CatalogEvent.
	event(ev any)
	// resync says events may have been missed; snap replaces what is known (nil: the
	// receiver fetches a snapshot itself).
	resync(snap *host.Snapshot)
}

// sinkSet is a copy-on-write set of sinks: a source iterates it without a lock.
type sinkSet struct {
	mu   sync.Mutex
	list atomic.Pointer[[]sink]
}

func (s *sinkSet) add(k sink) (remove func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var next []sink
	if cur := s.list.Load(); cur != nil {
		next = append(next, *cur...)
	}
	next = append(next, k)
	s.list.Store(&next)
	var once sync.Once
	return func() { once.Do(func() { s.remove(k) }) }
}

func (s *sinkSet) remove(k sink) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.list.Load()
	if cur == nil {
		return
	}
	next := make([]sink, 0, len(*cur))
	for _, x := range *cur {
		if x != k {
			next = append(next, x)
		}
	}
	s.list.Store(&next)
}

func (s *sinkSet) len() int {
	if cur := s.list.Load(); cur != nil {
		return len(*cur)
	}
	return 0
}

func (s *sinkSet) each(f func(sink)) {
	if cur := s.list.Load(); cur != nil {
		for _, k := range *cur {
			f(k)
		}
	}
}

func (s *sinkSet) event(ev any) {
	if cur := s.list.Load(); cur != nil {
		for _, k := range *cur {
			k.event(ev)
		}
	}
}

func (s *sinkSet) resync(snap *host.Snapshot) {
	if cur := s.list.Load(); cur != nil {
		for _, k := range *cur {
			k.resync(snap)
		}
	}
}

// hub is the host.Observer of a Local's host: it hands every event to the sinks
// registered with it (the Local's watchers, a Node's watchers, relayed processes).
type hub struct{ sinks sinkSet }

func (h *hub) ServerChanged(e host.ServerEvent)   { h.sinks.event(e) }
func (h *hub) StateChanged(e host.StateEvent)     { h.sinks.event(e) }
func (h *hub) CatalogChanged(e host.CatalogEvent) { h.sinks.event(e) }

func seqOf(ev any) uint64 {
	switch e := ev.(type) {
	case host.ServerEvent:
		return e.Seq
	case host.StateEvent:
		return e.Seq
	case host.CatalogEvent:
		return e.Seq
	}
	return 0
}

// watchq delivers events to one Watcher from a goroutine of its own, through a queue
// of at most max events. An overflow empties the queue and becomes a Resync (the
// snapshot then supersedes what was dropped), so a slow watcher costs bounded memory
// and delays nobody else.
type watchq struct {
	w     Watcher
	fetch func(context.Context) (host.Snapshot, error)
	max   int

	mu      sync.Mutex
	q       []any
	head    int
	pending bool           // a resync is due before the next event
	snap    *host.Snapshot // the resync's snapshot; nil: fetch one
	stopped bool
	dropped atomic.Uint64

	wake   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
}

// newWatchq starts delivering to w. Its owner registers it as a sink and then calls
// resync, so the first delivery is a Resync whose snapshot no event after the
// registration can predate.
func newWatchq(w Watcher, max int, fetch func(context.Context) (host.Snapshot, error)) *watchq {
	q := &watchq{w: w, fetch: fetch, max: max, wake: make(chan struct{}, 1)}
	q.ctx, q.cancel = context.WithCancel(context.Background())
	go q.run()
	return q
}

func (q *watchq) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *watchq) event(ev any) {
	q.mu.Lock()
	if q.stopped {
		q.mu.Unlock()
		return
	}
	if len(q.q)-q.head >= q.max {
		q.dropped.Add(uint64(len(q.q) - q.head))
		q.q, q.head = q.q[:0], 0
		q.pending, q.snap = true, nil
	} else {
		if q.head > 0 && q.head == len(q.q) {
			q.q, q.head = q.q[:0], 0
		}
		q.q = append(q.q, ev)
	}
	q.mu.Unlock()
	q.signal()
}

// resync drops what is queued (the snapshot supersedes it) and makes a Resync due.
func (q *watchq) resync(snap *host.Snapshot) {
	q.mu.Lock()
	if !q.stopped {
		q.q, q.head = q.q[:0], 0
		q.pending, q.snap = true, snap
	}
	q.mu.Unlock()
	q.signal()
}

// stop ends the deliveries: none starts after it returns (one under way may finish).
func (q *watchq) stop() {
	q.mu.Lock()
	q.stopped = true
	q.q = nil
	q.mu.Unlock()
	q.cancel()
}

func (q *watchq) run() {
	// minSeq is the last Seq this watcher has: the Resync's version, then each event
	// delivered. Events from one host come in Seq order, so one at or below it is one
	// the Resync covered or a duplicate; a new host always comes with a Resync first.
	var minSeq uint64
	for {
		select {
		case <-q.wake:
		case <-q.ctx.Done():
			return
		}
		for {
			q.mu.Lock()
			if q.stopped {
				q.mu.Unlock()
				return
			}
			if q.pending {
				snap := q.snap
				q.pending, q.snap = false, nil
				q.mu.Unlock()
				if snap == nil {
					s, err := q.fetch(q.ctx)
					if err != nil {
						// No host to ask now; whoever brings the next one resyncs.
						continue
					}
					snap = &s
				}
				if !q.live() {
					return
				}
				minSeq = snap.Version
				q.w.Resync(*snap)
				continue
			}
			if q.head == len(q.q) {
				q.mu.Unlock()
				break
			}
			ev := q.q[q.head]
			q.q[q.head] = nil
			q.head++
			q.mu.Unlock()
			if seqOf(ev) <= minSeq || !q.live() {
				continue
			}
			minSeq = seqOf(ev)
			switch e := ev.(type) {
			case host.ServerEvent:
				q.w.ServerChanged(e)
			case host.StateEvent:
				q.w.StateChanged(e)
			case host.CatalogEvent:
				q.w.CatalogChanged(e)
			}
		}
	}
}

func (q *watchq) live() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return !q.stopped
}
