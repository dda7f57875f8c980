package store

import (
	"context"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
)

// maxAuditBatch bounds one group commit, so one transaction never grows without limit
// under sustained load.
const maxAuditBatch = 256

// pendingAppend is one AppendAudit waiting for its commit.
type pendingAppend struct {
	ev   audit.Event
	args string
	done chan error // receives exactly once, after the batch holding ev committed or failed
}

// enqueueAudit is group commit without a background goroutine. Every appender queues
// its event, then either becomes the writer (by taking auditSem) or waits for its
// result. The writer takes up to maxAuditBatch queued events, writes them in one
// transaction (one fsync), reports to each, and hands auditSem on. One process thus
// holds the SQLite write lock with a single connection at a time instead of many
// connections spinning in the busy handler, and N concurrent calls cost about one
// fsync rather than N. Each caller still returns only after its own event is durable.
//
// If ctx ends while the event is still queued, it is withdrawn and never written; once
// a writer has taken it, the caller waits for that commit's outcome, so an error
// always means "not written" and nil always means "durable".
func (s *Store) enqueueAudit(ctx context.Context, p *pendingAppend) error {
	s.auditMu.Lock()
	s.auditQueue = append(s.auditQueue, p)
	s.auditMu.Unlock()
	for {
		select {
		case err := <-p.done:
			return err
		case s.auditSem <- struct{}{}:
			s.writeAuditBatch()
			<-s.auditSem
		case <-ctx.Done():
			if s.withdraw(p) {
				return ctx.Err()
			}
			return <-p.done
		}
	}
}

// writeAuditBatch runs with auditSem held.
func (s *Store) writeAuditBatch() {
	s.auditMu.Lock()
	n := min(len(s.auditQueue), maxAuditBatch)
	batch := append([]*pendingAppend(nil), s.auditQueue[:n]...)
	s.auditQueue = append(s.auditQueue[:0:0], s.auditQueue[n:]...)
	s.auditMu.Unlock()
	if len(batch) == 0 {
		return
	}
	// The batch is written on behalf of callers whose contexts may end independently;
	// none of them may abort the others' commit, so the write is not cancellable. It is
	// bounded by the busy timeout.
	start := time.Now()
	err := s.insertAuditBatch(context.Background(), batch)
	if f := s.onCommit.Load(); f != nil {
		(*f)(time.Since(start), len(batch), err)
	}
	if err != nil {
		err = fmt.Errorf("writing %d event(s): %w", len(batch), err)
		for _, p := range batch {
			p.ev.Seq, p.ev.PrevHash, p.ev.Hash = 0, "", ""
		}
	}
	for _, p := range batch {
		p.done <- err
	}
}

// withdraw removes p from the queue if no writer has taken it yet.
func (s *Store) withdraw(p *pendingAppend) bool {
	s.auditMu.Lock()
	defer s.auditMu.Unlock()
	for i, q := range s.auditQueue {
		if q == p {
			s.auditQueue = append(s.auditQueue[:i], s.auditQueue[i+1:]...)
			return true
		}
	}
	return false
}

// ObserveAuditCommits has f called after every group commit (or failed attempt) with
// its duration and event count (toolgate serve's /metrics). It runs on the committing
// goroutine, after the transaction, so it must be quick; nil stops the calls.
func (s *Store) ObserveAuditCommits(f func(d time.Duration, events int, err error)) {
	if f == nil {
		s.onCommit.Store(nil)
		return
	}
	s.onCommit.Store(&f)
}

// AuditQueueDepth is how many audit events wait for a group commit now: calls whose
// decision is made and held until it is durable.
func (s *Store) AuditQueueDepth() int {
	s.auditMu.Lock()
	defer s.auditMu.Unlock()
	return len(s.auditQueue)
}
