package mcpserver

import (
	"fmt"
	"testing"
)

// TestOutboxCoalescesUpdates: a flood of updates of one URI is one pending update,
// distinct URIs keep their order, and the pending set never holds more than
// maxPendingUpdates; nothing is kept while no stream is open.
func TestOutboxCoalescesUpdates(t *testing.T) {
	var o outbox
	o.postURI("a://x")
	if o.uris != nil {
		t.Fatal("an update was kept with no stream open")
	}
	o.claim()
	for range 10000 {
		o.postURI("a://x")
	}
	o.postURI("a://y")
	if got := fmt.Sprint(o.takeURIs()); got != "[a://x a://y]" {
		t.Errorf("pending %s, want [a://x a://y]", got)
	}
	for i := range maxPendingUpdates + 100 {
		o.postURI(fmt.Sprint("a://", i))
	}
	if n := len(o.takeURIs()); n != maxPendingUpdates {
		t.Errorf("%d pending, want the cap %d", n, maxPendingUpdates)
	}
	o.postURI(`a://"quoted"` + "\n")
	if got := string(updatedMessage(o.takeURIs()[0])); got != `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"a://\"quoted\"\n"}}` {
		t.Errorf("message %s", got)
	}
	o.unclaim()
	o.postURI("a://z")
	if len(o.takeURIs()) != 0 {
		t.Error("an update was kept after the stream closed")
	}
}
