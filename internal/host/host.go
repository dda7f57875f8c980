package host

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
)

// Isolation says who shares a server's connection.
type Isolation string

const (
	// IsolationShared (the default): one connection per server, shared by every caller.
	IsolationShared Isolation = "shared"
	// IsolationSession: one connection per caller session (stateful servers such as
	// browsers), closed by [Host.EndSession].
	IsolationSession Isolation = "session"
)

// Definition is one installed server as the host needs it. The integrator builds it
// from the stored installation (internal/mcpconfig's normalised server and policy).
type Definition struct {
	// Name identifies the server (1–128 printable characters, no spaces).
	Name string
	// Fingerprint identifies the configuration (sha256:… over the normalised
	// definition). Update restarts a running server only when it, or Isolation,
	// changed; a changed fingerprint also lifts auth_required and an open circuit.
	Fingerprint string
	// Isolation is "shared" (also when empty) or "session".
	Isolation Isolation
	// Required servers start when installed and are kept running: never stopped for
	// idleness, started again whenever they have no connection.
	Required bool
	// Disabled is policy.enabled == false: nothing runs and calls are refused.
	Disabled bool
	// CallTimeout bounds each call (tools/call, resources/read, prompts/get …): past
	// it the call is cancelled upstream and fails ErrTimeout, and the connection is
	// probed with a ping and restarted if that goes unanswered too. Zero is
	// DefaultCallTimeout; negative is no deadline. Time the upstream spends waiting
	// on the client (its own requests: elicitation, sampling) does not count.
	CallTimeout time.Duration
	// Config is handed to Dialer.Dial unchanged; the host never looks inside.
	Config any
}

func (d *Definition) normalize() error {
	if d.Isolation == "" {
		d.Isolation = IsolationShared
	}
	switch {
	case d.Name == "" || len(d.Name) > 128:
		return fmt.Errorf("%w: name must be 1-128 characters", ErrInvalidDefinition)
	case strings.IndexFunc(d.Name, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) >= 0:
		return fmt.Errorf("%w: name %q has a space or control character", ErrInvalidDefinition, d.Name)
	case d.Fingerprint == "":
		return fmt.Errorf("%w: server %q: empty fingerprint", ErrInvalidDefinition, d.Name)
	case d.Isolation != IsolationShared && d.Isolation != IsolationSession:
		return fmt.Errorf("%w: server %q: isolation %q (want shared or session)", ErrInvalidDefinition, d.Name, d.Isolation)
	}
	return nil
}

// Host supervises every installed server. It is safe for concurrent use. No lock is
// held across a Dial, Call, Ping, Close or catalogue store call; each server has its
// own lock, so one server's trouble never waits on another's.
type Host struct {
	opts Options
	log  *slog.Logger
	ev   *dispatcher

	// ctx is the parent of every dial, ping and refresh; Shutdown cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	closed atomic.Bool
	// servers is replaced, never modified, so Call reads it without a lock.
	servers atomic.Pointer[map[string]*runtime]

	mu sync.Mutex // serializes changes to servers and draining
	// draining holds removed runtimes whose connections may still be closing; several
	// may share a name (removed, reinstalled, removed again).
	draining map[*runtime]bool
	shutdown struct {
		once sync.Once
		done chan struct{}
	}
}

// New builds a host and installs opts.Servers (starting the required ones).
func New(opts Options) (*Host, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	h := &Host{opts: o, log: log, ev: newDispatcher(o.Observer), draining: map[*runtime]bool{}}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.shutdown.done = make(chan struct{})
	empty := map[string]*runtime{}
	h.servers.Store(&empty)
	for _, def := range o.Servers {
		if _, err := h.Install(h.ctx, def); err != nil {
			_ = h.Shutdown(context.Background())
			return nil, err
		}
	}
	return h, nil
}

func (h *Host) lookup(name string) *runtime { return (*h.servers.Load())[name] }

// Install installs def, or updates it when a server of that name is installed (see
// Update). A new server's persisted catalogue is loaded first, so Catalog answers at
// once; a required one starts in the background.
func (h *Host) Install(ctx context.Context, def Definition) (Change, error) {
	if err := def.normalize(); err != nil {
		return "", err
	}
	if h.closed.Load() {
		return "", &ServerError{Server: def.Name, Kind: ErrShutdown}
	}
	if h.lookup(def.Name) != nil {
		return h.Update(ctx, def)
	}
	var cat *Catalog
	if h.opts.Catalogs != nil {
		c, ok, err := h.opts.Catalogs.LoadCatalog(ctx, def.Name)
		if err != nil {
			h.log.Warn("host: loading persisted catalogue", "server", def.Name, "err", err)
		} else if ok {
			cat = &c
		}
	}
	h.mu.Lock()
	if h.closed.Load() {
		h.mu.Unlock()
		return "", &ServerError{Server: def.Name, Kind: ErrShutdown}
	}
	if h.lookup(def.Name) != nil { // installed meanwhile
		h.mu.Unlock()
		return h.Update(ctx, def)
	}
	r := newRuntime(h, def, cat)
	for p := range h.draining {
		switch {
		case p.isDrained():
			delete(h.draining, p)
		case p.name == def.Name:
			r.prevs = append(r.prevs, p)
		}
	}
	next := maps.Clone(*h.servers.Load())
	next[def.Name] = r
	h.servers.Store(&next)
	h.emitServer(def.Name, ChangeInstalled)
	r.mu.Lock()
	r.keepRequiredLocked()
	r.recomputeLocked(ReasonRequired)
	r.mu.Unlock()
	h.mu.Unlock()
	return ChangeInstalled, nil
}

// Update replaces an installed server's definition. It reports ChangeUnchanged (and
// does nothing) when fingerprint, isolation, required and disabled are all the same.
// A changed fingerprint restarts every running connection with the new definition and
// lifts auth_required and an open circuit (credentials or configuration changed); a
// changed isolation closes every connection (the next use starts afresh).
func (h *Host) Update(ctx context.Context, def Definition) (Change, error) {
	if err := def.normalize(); err != nil {
		return "", err
	}
	r := h.lookup(def.Name)
	if r == nil {
		return "", &ServerError{Server: def.Name, Kind: ErrUnknownServer}
	}
	return r.update(def)
}

// Remove uninstalls a server: new calls are refused at once, its connections are
// closed, and its persisted catalogue is deleted. The Observer gets ServerEvent
// "removed" at once and nothing more about this installation. Remove returns when
// everything closed, or with ctx's error if ctx ends first (closing goes on; a later
// Install of the same name waits for it before starting anything).
func (h *Host) Remove(ctx context.Context, name string) error {
	h.mu.Lock()
	r := h.lookup(name)
	if r == nil {
		h.mu.Unlock()
		return &ServerError{Server: name, Kind: ErrUnknownServer}
	}
	next := maps.Clone(*h.servers.Load())
	delete(next, name)
	h.servers.Store(&next)
	h.draining[r] = true
	h.mu.Unlock()

	drained := r.remove()
	h.emitServer(name, ChangeRemoved)
	if h.opts.Catalogs != nil {
		// A refresh in flight finishes (and saves) first; none starts after: the runtime
		// is marked removed.
		select {
		case r.refreshSem <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("removing server %q: its catalogue refresh is still running: %w", name, ctx.Err())
		}
		err := h.opts.Catalogs.DeleteCatalog(ctx, name)
		<-r.refreshSem
		if err != nil {
			return fmt.Errorf("removing server %q: deleting its catalogue: %w", name, err)
		}
	}
	select {
	case <-drained:
	case <-ctx.Done():
		return fmt.Errorf("removing server %q: connections still closing: %w", name, ctx.Err())
	}
	h.mu.Lock()
	delete(h.draining, r)
	h.mu.Unlock()
	return nil
}

// SetEnabled sets policy.enabled. Disabling closes every connection (state stopping,
// then disabled) and refuses calls; enabling lifts auth_required and an open circuit
// and starts a required server. It does not wait for connections to close.
func (h *Host) SetEnabled(name string, enabled bool) error {
	r := h.lookup(name)
	if r == nil {
		return &ServerError{Server: name, Kind: ErrUnknownServer}
	}
	return r.setEnabled(enabled)
}

// Restart closes a server's connections and starts them again at once, lifting
// auth_required and an open circuit and resetting the backoff. A server that was not
// running is started. It returns once the restart is under way; the Observer sees the
// transitions.
func (h *Host) Restart(name string) error {
	r := h.lookup(name)
	if r == nil {
		return &ServerError{Server: name, Kind: ErrUnknownServer}
	}
	return r.restart()
}

// Warm starts a shared server that is not running, without waiting for it: a caller
// session whose catalogue publishes the server's tools has opened, and its first call
// should not wait for the process to start (an npm server takes 150 ms to seconds).
// It does nothing for a server that is running or starting, disabled, waiting out a
// backoff or an open circuit, auth_required, unknown, or "session"-isolated (whose
// connections belong to caller sessions). A warmed server that is never called stops
// after the idle timeout like any other.
func (h *Host) Warm(name string) {
	r := h.lookup(name)
	if r == nil || r.session.Load() {
		return
	}
	if c := r.fast.Load(); c != nil && !c.ended() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.slots[""] != nil || r.gateLocked("") != nil {
		return
	}
	r.startDialLocked(r.newSlotLocked(""))
	r.recomputeLocked(ReasonWarm)
}

// EndSession closes the per-session connections a caller session opened on "session"
// servers. It does not wait for them to close. Shared connections are not affected.
func (h *Host) EndSession(key string) {
	if key == "" {
		return
	}
	for _, r := range *h.servers.Load() {
		r.endSession(key)
	}
}

// Shutdown stops every server's connections in parallel and returns when all are
// closed (each within Options.StopTimeout), or when ctx ends, with a *ShutdownError
// naming the servers still closing. Afterwards every method refuses with ErrShutdown.
// Calling it again waits for the first call's outcome.
func (h *Host) Shutdown(ctx context.Context) error {
	h.shutdown.once.Do(func() {
		go h.runShutdown()
	})
	select {
	case <-h.shutdown.done:
	case <-ctx.Done():
		h.mu.Lock()
		unclosed := map[string]bool{}
		for _, r := range h.allRuntimesLocked() {
			if !r.isDrained() {
				unclosed[r.name] = true
			}
		}
		h.mu.Unlock()
		if len(unclosed) == 0 {
			return nil // only the observer's last events are still being delivered
		}
		return newShutdownError(unclosed, ctx.Err())
	}
	return nil
}

func (h *Host) runShutdown() {
	defer close(h.shutdown.done)
	h.mu.Lock()
	h.closed.Store(true)
	rts := h.allRuntimesLocked()
	h.mu.Unlock()
	var chans []<-chan struct{}
	for _, r := range rts {
		chans = append(chans, r.stopAll(ReasonShutdown))
	}
	h.cancel()
	for _, ch := range chans {
		<-ch
	}
	h.ev.close()
	<-h.ev.done
}

func (h *Host) allRuntimesLocked() []*runtime {
	var out []*runtime
	for _, r := range *h.servers.Load() {
		out = append(out, r)
	}
	for r := range h.draining {
		out = append(out, r)
	}
	return out
}

func (h *Host) emitServer(name string, c Change) {
	h.ev.emit(func(seq uint64) any {
		return ServerEvent{Seq: seq, At: now(), Server: name, Change: c}
	})
}
