package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Catalog returns server's current catalogue: the last one fetched, or the persisted
// one loaded at install. It never waits for the upstream. ok is false when the server
// is unknown or no catalogue was ever fetched for it.
func (h *Host) Catalog(server string) (c Catalog, ok bool) {
	r := h.lookup(server)
	if r == nil {
		return Catalog{}, false
	}
	if p := r.cat.Load(); p != nil {
		return *p, true
	}
	return Catalog{}, false
}

// RefreshCatalog fetches server's catalogue now, starting the server if it is not
// running (a catalogue refresh is a use, like a call), and returns the result. Each
// list is fetched only when the server's capabilities advertise it. A list whose
// fetch fails keeps its previous items, and the error is returned with the catalogue.
func (h *Host) RefreshCatalog(ctx context.Context, server string) (Catalog, error) {
	r := h.lookup(server)
	if r == nil {
		return Catalog{}, &ServerError{Server: server, Kind: ErrUnknownServer}
	}
	c, err := r.acquire(ctx, "")
	if err != nil {
		return Catalog{}, err
	}
	err = r.refresh(ctx, allKinds, c)
	c.release(err == nil)
	if errors.Is(err, errNotLive) {
		r.mu.Lock()
		err = r.errLocked(ErrStopped, err)
		r.mu.Unlock()
	}
	cat, _ := h.Catalog(server)
	return cat, err
}

// errNotLive: a refresh found no live connection to fetch over.
var errNotLive = errors.New("no live connection")

// notify is the Session's notification hook: a list_changed marks lists stale and
// schedules one debounced refresh for a burst of them.
func (c *conn) notify(method string, params json.RawMessage) {
	if method == notificationMessage {
		c.route.notify(method, params)
		return
	}
	k := listChangedKinds(method)
	if k == 0 {
		if fn := c.r.h.opts.Notifications; fn != nil {
			fn(c.r.name, c.s.key, method, params)
		}
		return
	}
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.removed || r.h.closed.Load() {
		return
	}
	r.pending |= k
	if r.debounce == nil {
		r.debounce = time.AfterFunc(r.h.opts.Catalog.Debounce, func() {
			r.mu.Lock()
			r.debounce = nil
			r.mu.Unlock()
			_ = r.refresh(r.h.ctx, 0, c)
		})
	}
}

// refresh refetches the lists in k (plus any pending) over a live connection,
// preferring prefer, and publishes and persists the result when its content changed.
func (r *runtime) refresh(ctx context.Context, k kind, prefer *conn) error {
	return r.refreshOver(ctx, k, prefer, false)
}

// refreshOwn is the fetch a connection makes when it goes live: over that
// connection only. If it died before its turn, whichever connection replaced it
// makes its own start fetch, so falling through to it would fetch twice.
func (r *runtime) refreshOwn(ctx context.Context, c *conn) error {
	return r.refreshOver(ctx, allKinds, c, true)
}

func (r *runtime) refreshOver(ctx context.Context, k kind, prefer *conn, only bool) error {
	select {
	case r.refreshSem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-r.refreshSem }()

	r.mu.Lock()
	if r.removed || r.h.closed.Load() {
		err := r.errLocked(ErrStopped, nil)
		r.mu.Unlock()
		return err
	}
	k |= r.pending
	r.pending = 0
	if k == 0 {
		r.mu.Unlock()
		return nil
	}
	c := r.pickConnLocked(prefer)
	if only && c != prefer {
		c = nil
	}
	if c == nil || !c.acquire() {
		r.pending |= k // the next start fetches everything anyway
		r.mu.Unlock()
		return errNotLive
	}
	r.mu.Unlock()

	fctx, cancel := context.WithTimeout(ctx, r.h.opts.Catalog.Timeout)
	old := r.cat.Load()
	next, changed, err := r.h.opts.Catalog.build(fctx, c.sess, old, k)
	cancel()
	c.refs.Add(-1) // not a call: does not count as use for the idle timer

	r.mu.Lock()
	select {
	case <-c.sess.Done(): // the connection died under us: keep what we had
		r.pending |= k
		r.mu.Unlock()
		if err == nil {
			err = errNotLive
		}
		return err
	default:
	}
	r.catErr = err
	r.catFresh = true
	if r.removed {
		r.mu.Unlock()
		return err
	}
	if changed {
		next.Version = 1
		if old != nil {
			next.Version = old.Version + 1
		}
		next.FetchedAt = now()
		r.cat.Store(&next)
		name, counts, at := r.name, next.Counts(), next.FetchedAt
		r.h.ev.emit(func(seq uint64) any {
			return CatalogEvent{Seq: seq, At: at, Server: name, Version: next.Version, Counts: counts}
		})
	}
	cur := r.cat.Load()
	save := r.h.opts.Catalogs != nil && cur != nil && cur.Digest != r.persisted
	r.mu.Unlock()
	if !save { // unchanged, and the store already has it (or there is no store)
		return err
	}
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), r.h.opts.Catalog.Timeout)
	serr := r.h.opts.Catalogs.SaveCatalog(sctx, r.name, *cur)
	scancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	if serr != nil {
		r.h.log.Warn("host: saving catalogue", "server", r.name, "version", cur.Version, "err", serr)
		err = errors.Join(err, fmt.Errorf("saving catalogue version %d: %w", cur.Version, serr))
		r.catErr = err
		return err
	}
	r.persisted = cur.Digest
	return err
}

// pickConnLocked chooses the live connection to fetch over: prefer (the one that
// announced the change), else the "" one, else any.
func (r *runtime) pickConnLocked(prefer *conn) *conn {
	if prefer != nil && prefer.s.conn == prefer && prefer.s.phase == phaseLive {
		return prefer
	}
	if s := r.slots[""]; s != nil && s.phase == phaseLive {
		return s.conn
	}
	for _, s := range r.slots {
		if s.phase == phaseLive {
			return s.conn
		}
	}
	return nil
}
