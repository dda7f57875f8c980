package app

import (
	"context"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/host"
	"github.com/toolgate/toolgate/internal/mgmt"
	"github.com/toolgate/toolgate/internal/store"
)

// subscribers are the management protocol's notification feeds (Manager.Subscribe):
// the daemon's /v1/rpc sockets. A notification is handed to every feed under mu, in
// the order the changes happened; a feed only queues it (mgmt.Handler never waits),
// so no I/O happens under the lock.
type subscribers struct {
	mu   sync.Mutex
	next int
	fns  map[int]func(mgmt.Notification)
}

func (s *subscribers) add(fn func(mgmt.Notification)) (stop func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fns == nil {
		s.fns = map[int]func(mgmt.Notification){}
	}
	id := s.next
	s.next++
	s.fns[id] = fn
	return func() {
		s.mu.Lock()
		delete(s.fns, id)
		s.mu.Unlock()
	}
}

func (s *subscribers) active() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.fns) > 0
}

func (s *subscribers) publish(n mgmt.Notification) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, fn := range s.fns {
		fn(n)
	}
}

// notified names m for a notification.
func notified(m *store.MCPServer) mgmt.NotifiedServer {
	return mgmt.NotifiedServer{ServerID: m.ID, Name: m.Name, WorkspaceID: m.WorkspaceID, Scope: m.Scope}
}

// snapshotVersion is the persisted snapshot_version now; read after the change it
// reports, so it is at least the change's own (a later one only makes a client
// refetch once more).
func (a *App) snapshotVersion(ctx context.Context) uint64 {
	v, err := a.st.MCPSnapshot(ctx)
	if err != nil {
		a.log.Warn("reading the snapshot version", "err", err)
	}
	return v
}

// publishAbout sends the notification build makes about server, with the server's
// ids and the snapshot version now; nothing when the server is not known.
func (a *App) publishAbout(server string, build func(ver uint64, who mgmt.NotifiedServer) mgmt.Notification) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, ok := a.usync.server(ctx, server)
	if !ok {
		return
	}
	a.subs.publish(build(a.snapshotVersion(ctx), notified(&m)))
}

func (a *App) publishStatus(e host.StateEvent) {
	a.publishAbout(e.Server, func(ver uint64, who mgmt.NotifiedServer) mgmt.Notification {
		return &mgmt.StatusChanged{SnapshotVersion: ver, At: e.At.Unix(), NotifiedServer: who,
			PreviousState: string(e.From), State: string(e.To), Live: e.To.Live(), Status: string(e.To),
			Reason: string(e.Reason), Error: e.Error}
	})
}

func (a *App) publishCatalog(e host.CatalogEvent) {
	a.publishAbout(e.Server, func(ver uint64, who mgmt.NotifiedServer) mgmt.Notification {
		return &mgmt.CatalogChanged{SnapshotVersion: ver, At: e.At.Unix(), NotifiedServer: who,
			CatalogVersion: e.Version, ToolsCount: e.Counts.Tools, ResourcesCount: e.Counts.Resources,
			ResourceTemplatesCount: e.Counts.ResourceTemplates, PromptsCount: e.Counts.Prompts}
	})
}
