package host

import (
	"sync"
	"time"
)

// Observer receives every change the host makes, in the order it made them. Seq is the
// host's snapshot version after the change: it grows by one per event, across all
// servers, and [Host.Snapshot] reports the latest, so a client that read a snapshot
// at version V knows every event with Seq > V is news. The mapping onto the management
// protocol is: ServerChanged → mcp/changed, StateChanged → mcp/server/status_changed,
// CatalogChanged → mcp/server/catalog_changed.
//
// Methods are called from one goroutine, never with a host lock held, and should
// return quickly: while one runs, later events wait (in memory) behind it. They may
// call the host's read methods (Status, Snapshot, Catalog) but not Shutdown, which
// waits for the last event to be delivered.
type Observer interface {
	ServerChanged(ServerEvent)
	StateChanged(StateEvent)
	CatalogChanged(CatalogEvent)
}

// Change says what happened to a server's installation.
type Change string

const (
	ChangeInstalled Change = "installed"
	ChangeUpdated   Change = "updated"   // fingerprint, isolation or required changed
	ChangeUnchanged Change = "unchanged" // returned by Install/Update only; never an event
	ChangePolicy    Change = "policy"    // SetEnabled changed policy.enabled
	ChangeRemoved   Change = "removed"
)

// ServerEvent reports an installation or policy change.
type ServerEvent struct {
	Seq    uint64
	At     time.Time
	Server string
	Change Change
}

// StateEvent reports one state transition (always one of [Transitions]).
type StateEvent struct {
	Seq      uint64
	At       time.Time
	Server   string
	From, To State
	Reason   Reason
	Error    string // the last error, when the transition was caused by one
}

// CatalogEvent reports that a server's catalogue content changed.
type CatalogEvent struct {
	Seq     uint64
	At      time.Time
	Server  string
	Version uint64 // the catalogue's new version
	Counts  Counts
}

// dispatcher delivers events to the Observer on one goroutine, in enqueue order. The
// queue is appended under its own leaf lock (callers may hold a runtime lock), so a slow
// observer never blocks supervision.
type dispatcher struct {
	obs  Observer
	mu   sync.Mutex
	seq  uint64
	q    []any
	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

func newDispatcher(obs Observer) *dispatcher {
	d := &dispatcher{obs: obs, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go d.run()
	return d
}

// version is the Seq of the latest event enqueued.
func (d *dispatcher) version() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.seq
}

// emit stamps e with the next Seq and queues it. set is called with the Seq under the
// dispatcher's lock so events leave in Seq order.
func (d *dispatcher) emit(build func(seq uint64) any) {
	d.mu.Lock()
	d.seq++
	ev := build(d.seq)
	if d.obs != nil {
		d.q = append(d.q, ev)
	}
	d.mu.Unlock()
	if d.obs != nil {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
}

func (d *dispatcher) run() {
	defer close(d.done)
	for {
		select {
		case <-d.wake:
		case <-d.stop:
			d.drain()
			return
		}
		d.drain()
	}
}

func (d *dispatcher) drain() {
	for {
		d.mu.Lock()
		q := d.q
		d.q = nil
		d.mu.Unlock()
		if len(q) == 0 {
			return
		}
		for _, ev := range q {
			switch e := ev.(type) {
			case ServerEvent:
				d.obs.ServerChanged(e)
			case StateEvent:
				d.obs.StateChanged(e)
			case CatalogEvent:
				d.obs.CatalogChanged(e)
			}
		}
	}
}

// close delivers what is queued and stops the goroutine; done is closed after.
func (d *dispatcher) close() { close(d.stop) }
