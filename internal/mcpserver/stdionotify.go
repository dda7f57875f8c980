package mcpserver

import "context"

// stdioLists are the lists whose changes a stdio connection is told of: a stdio
// turn (toolgate mcp, toolgate bridge --stdio) serves one tools catalogue for its
// life, so its tools never change; its relayed lists may.
const stdioLists = ResourcesList | PromptsList

// watchStdio tells a stdio connection the changes of its lists as notification
// lines, and the updates of the resources it subscribed to (resourcewatch.go),
// once it is initialized, until ctx ends; the returned wait returns once
// nothing more is written. Changes are coalesced bits (outbox), so a client that
// does not read stdout holds one blocked write, nothing that grows.
func watchStdio(ctx context.Context, c *conn, write func([]byte) error) (wait func()) {
	lw, ok := asListWatcher(c.turn)
	if !ok {
		return func() {}
	}
	c.pushes, c.pushAnyEra = stdioLists, true
	var out outbox
	out.claim()
	stop := lw.WatchLists(stdioLists, out.post)
	stopRes := watchResources(c.turn, &out)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer stop()
		defer stopRes()
		for {
			select {
			case <-ctx.Done():
				return
			case <-out.wake:
				k := out.take()
				if !c.isInitialized() {
					out.takeURIs()
					continue // nothing was listed yet: nothing changed for the client
				}
				for _, n := range listNotifications {
					if k&n.kind != 0 && write(n.msg) != nil {
						return
					}
				}
				if !writeUpdates(&out, write) {
					return
				}
			}
		}
	}()
	return func() { <-done }
}
