// Package kerneltest provides in-memory fakes of the kernel's consumer interfaces (the
// audit log and the escalation log) with failure injection, for tests of the kernel and
// of the surfaces built on it.
package kerneltest

import (
	"context"
	"errors"
	"sync"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/kernel"
)

// ErrInjected is the failure the fakes return when told to fail.
var ErrInjected = errors.New("kerneltest: injected failure")

// Audit is an in-memory kernel.AuditLog.
type Audit struct {
	mu     sync.Mutex
	events []audit.Event
	fail   bool
}

// AppendAudit stores a copy of e and assigns Seq, or fails when SetFailing(true).
func (a *Audit) AppendAudit(_ context.Context, e *audit.Event) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail {
		return ErrInjected
	}
	e.Seq = int64(len(a.events) + 1)
	a.events = append(a.events, *e)
	return nil
}

// SetFailing makes later appends fail (true) or succeed (false).
func (a *Audit) SetFailing(f bool) { a.mu.Lock(); a.fail = f; a.mu.Unlock() }

// Events returns a copy of everything appended so far.
func (a *Audit) Events() []audit.Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]audit.Event(nil), a.events...)
}

// Len is the number of events appended so far.
func (a *Audit) Len() int { a.mu.Lock(); defer a.mu.Unlock(); return len(a.events) }

// ByCall returns the events recorded for one call id, in order.
func (a *Audit) ByCall(callID string) []audit.Event {
	var out []audit.Event
	for _, e := range a.Events() {
		if e.CallID == callID {
			out = append(out, e)
		}
	}
	return out
}

// Last returns the most recent event, or the zero Event.
func (a *Audit) Last() audit.Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.events) == 0 {
		return audit.Event{}
	}
	return a.events[len(a.events)-1]
}

// Escalations is an in-memory kernel.EscalationLog.
type Escalations struct {
	mu   sync.Mutex
	list []kernel.Escalation
	fail bool
}

// RecordEscalation stores e, or fails when SetFailing(true).
func (s *Escalations) RecordEscalation(_ context.Context, e kernel.Escalation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return ErrInjected
	}
	s.list = append(s.list, e)
	return nil
}

// SetFailing makes later records fail (true) or succeed (false).
func (s *Escalations) SetFailing(f bool) { s.mu.Lock(); s.fail = f; s.mu.Unlock() }

// List returns a copy of the recorded escalations.
func (s *Escalations) List() []kernel.Escalation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]kernel.Escalation(nil), s.list...)
}
