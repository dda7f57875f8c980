package mcpserver

import (
	"encoding/json"

	"github.com/toolgate/toolgate/internal/mcpspec"
)

// Resource updates (docs/host.md, "Resource updates"): a session that subscribed to
// a resource (resources/subscribe, relayed by its Turn) is told
// notifications/resources/updated on the stream that carries its list changes (the
// GET stream of an HTTP session, stdout of a stdio connection). Like list changes
// they are coalesced, not queued: a URI is in a session's pending set at most once
// until its stream's writer takes it, and the set holds at most maxPendingUpdates
// URIs, so a flood of updates for one resource is one notification per stream
// wake-up and a client that never reads costs nothing that grows.

// ResourceWatcher is a Turn whose sessions can subscribe to resources.
// WatchResources starts telling updated the URIs of the resources the session
// subscribed to that changed (and that it may still read), until stop is called;
// stop returns once no call of updated runs or will run. updated must return at
// once (it only marks the session's stream).
type ResourceWatcher interface {
	WatchResources(updated func(uri string)) (stop func())
}

// maxPendingUpdates bounds the URIs a session's stream has still to write: as many
// as a session may subscribe to (app's cap), so an update is dropped only when the
// Turn reports more distinct URIs than that before the writer runs.
const maxPendingUpdates = 256

// asResourceWatcher returns the ResourceWatcher behind t.
func asResourceWatcher(t Turn) (ResourceWatcher, bool) {
	if s, ok := t.(sharedTurn); ok {
		t = s.Turn
	}
	w, ok := t.(ResourceWatcher)
	return w, ok
}

// postURI marks uri updated for the open stream; nothing without one.
func (o *outbox) postURI(uri string) {
	o.mu.Lock()
	if !o.open {
		o.mu.Unlock()
		return
	}
	if _, dup := o.uris[uri]; !dup {
		if len(o.uris) >= maxPendingUpdates {
			o.mu.Unlock()
			return
		}
		if o.uris == nil {
			o.uris = map[string]struct{}{}
		}
		o.uris[uri] = struct{}{}
		o.order = append(o.order, uri)
	}
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// takeURIs returns and clears the pending updates, in the order they came.
func (o *outbox) takeURIs() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	u := o.order
	o.order, o.uris = nil, nil
	return u
}

// updatedMessage is the notification telling one resource updated.
func updatedMessage(uri string) []byte {
	p, _ := json.Marshal(struct {
		URI string `json:"uri"`
	}{uri})
	return []byte(`{"jsonrpc":"2.0","method":"` + mcpspec.NotificationResourceUpdated + `","params":` + string(p) + `}`)
}

// watchResources starts telling o the session's resource updates, when its Turn
// reports them; the returned stop ends that.
func watchResources(t Turn, o *outbox) (stop func()) {
	rw, ok := asResourceWatcher(t)
	if !ok {
		return func() {}
	}
	return rw.WatchResources(o.postURI)
}

// writeUpdates writes the pending updates of o with write; false when a write failed.
func writeUpdates(o *outbox, write func([]byte) error) bool {
	for _, uri := range o.takeURIs() {
		if write(updatedMessage(uri)) != nil {
			return false
		}
	}
	return true
}
