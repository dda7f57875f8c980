package hostrelay

import (
	"context"
	"encoding/json"

	"github.com/toolgate/toolgate/internal/host"
)

// Local is [Upstreams] over this process's own *host.Host: every method is the host's,
// with nothing in between but a context the host does not need. A [Node] that wins the
// election serves one to the processes relaying to it.
type Local struct {
	h      *host.Host
	hub    *hub
	reload ReloadFunc
	watchQ int
}

// NewLocal builds this process's host with newHost (passing it the observer that feeds
// Watch) and returns it as Upstreams. reload may be nil (Reload then does nothing).
func NewLocal(ctx context.Context, newHost NewHostFunc, reload ReloadFunc) (*Local, error) {
	return newLocal(ctx, newHost, reload, DefaultWatchQueue)
}

func newLocal(ctx context.Context, newHost NewHostFunc, reload ReloadFunc, watchQ int) (*Local, error) {
	hb := &hub{}
	h, err := newHost(ctx, hb)
	if err != nil {
		return nil, err
	}
	return &Local{h: h, hub: hb, reload: reload, watchQ: watchQ}, nil
}

var _ Upstreams = (*Local)(nil)

// Call implements Upstreams.
func (l *Local) Call(ctx context.Context, server, method string, params json.RawMessage, opts host.CallOptions) (json.RawMessage, error) {
	return l.h.Call(ctx, server, method, params, opts)
}

// Catalog implements Upstreams; it never fails.
func (l *Local) Catalog(_ context.Context, server string) (host.Catalog, bool, error) {
	c, ok := l.h.Catalog(server)
	return c, ok, nil
}

// RefreshCatalog implements Upstreams.
func (l *Local) RefreshCatalog(ctx context.Context, server string) (host.Catalog, error) {
	return l.h.RefreshCatalog(ctx, server)
}

// Status implements Upstreams; it never fails.
func (l *Local) Status(_ context.Context, server string) (host.Status, bool, error) {
	st, ok := l.h.Status(server)
	return st, ok, nil
}

// Snapshot implements Upstreams; it never fails.
func (l *Local) Snapshot(context.Context) (host.Snapshot, error) { return l.h.Snapshot(), nil }

// Restart implements Upstreams.
func (l *Local) Restart(_ context.Context, server string) error { return l.h.Restart(server) }

// Warm implements Upstreams; it never fails.
func (l *Local) Warm(_ context.Context, server string) error {
	l.h.Warm(server)
	return nil
}

// EndSession implements Upstreams; it never fails.
func (l *Local) EndSession(_ context.Context, key string) error {
	l.h.EndSession(key)
	return nil
}

// Reload implements Upstreams: it runs the ReloadFunc given to NewLocal.
func (l *Local) Reload(ctx context.Context) error {
	if l.reload == nil {
		return nil
	}
	return l.reload(ctx, l.h)
}

// Watch implements Upstreams.
func (l *Local) Watch(w Watcher) (stop func()) {
	q := newWatchq(w, l.watchQ, l.Snapshot)
	remove := l.hub.sinks.add(q)
	q.resync(nil)
	return func() {
		remove()
		q.stop()
	}
}

// Close implements Upstreams: it shuts the host down (host.Host.Shutdown), then stops
// the watchers' deliveries.
func (l *Local) Close(ctx context.Context) error {
	err := l.h.Shutdown(ctx)
	l.hub.sinks.each(func(k sink) {
		if q, ok := k.(*watchq); ok {
			q.stop()
		}
	})
	return err
}
