package store

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Topic names a kind of change a process can be woken for. Each topic has a version
// counter or table that stays the source of truth; a wake-up only says "re-read now".
type Topic string

// TopicPolicy covers grants and namespace switches, what PolicyVersion counts.
// Later topics (installed servers, pins, catalogue versions) add a constant here and a
// trigger in the PostgreSQL migration that adds their table (docs/storage.md).
const TopicPolicy Topic = "policy"

// TopicMCP covers installed MCP servers and their catalogues, what MCPSnapshot counts.
const TopicMCP Topic = "mcp"

// ChangesChannel is the PostgreSQL NOTIFY channel the migrations' triggers send a
// topic name on, in the transaction of the change (so it is delivered on commit, and
// never for a change rolled back).
const ChangesChannel = "toolgate_changes"

// ListenerApplicationName is the application_name of the listener's connection, so an
// operator can tell it apart in pg_stat_activity.
const ListenerApplicationName = "toolgate-listener"

// Listener timing: how long a silent connection waits before it is pinged (a dead TCP
// peer is otherwise noticed only by keepalives, minutes later), how long a ping or a
// connection attempt may take, and the reconnect backoff.
const (
	listenPingAfter  = 30 * time.Second
	listenIOTimeout  = 10 * time.Second
	listenMinBackoff = 50 * time.Millisecond
	listenMaxBackoff = 5 * time.Second
)

// Changes wakes subscribers when another process may have changed something they
// cache. On PostgreSQL a dedicated connection LISTENs on ChangesChannel; every
// (re)connection wakes every subscriber once, because notifications sent while it was
// down are lost and only a re-read can catch up. On SQLite nothing wakes: readers keep
// reading their version counter (e.g. PolicyVersion on every request), which is cheap
// there. Either way a wake-up carries no data and may be spurious; the counters stay
// the source of truth, so anyone who can NOTIFY on the database can at most cause
// re-reads.
type Changes struct {
	url string // "" on SQLite: nothing to listen to

	mu     sync.Mutex
	subs   map[*Subscription]struct{}
	cancel context.CancelFunc // stops the listener; nil until the first Subscribe
	done   chan struct{}      // closed when the listener has stopped
	closed bool

	live     atomic.Bool
	connects atomic.Int64
}

func newChanges(url string) *Changes {
	return &Changes{url: url, subs: map[*Subscription]struct{}{}}
}

// Changes is the store's change notifier.
func (s *Store) Changes() *Changes { return s.changes }

// Notifies reports whether this store delivers wake-ups at all (PostgreSQL).
func (c *Changes) Notifies() bool { return c.url != "" }

// Live reports whether the listener is connected now: while it is not, changes made
// elsewhere wake nobody until it reconnects (and then everyone).
func (c *Changes) Live() bool { return c.live.Load() }

// Subscription receives a value on C (coalesced: at most one waits) after a change on
// its topic may have been committed by any process, and after every reconnection of
// the listener. C is closed by Close or when the store closes.
type Subscription struct {
	C     <-chan struct{}
	c     chan struct{}
	topic Topic
	owner *Changes
}

// Subscribe returns a subscription to topic. On PostgreSQL the first subscription
// starts the listener; commands that never subscribe open no listening connection.
func (c *Changes) Subscribe(topic Topic) *Subscription {
	ch := make(chan struct{}, 1)
	sub := &Subscription{C: ch, c: ch, topic: topic, owner: c}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		close(ch)
		return sub
	}
	c.subs[sub] = struct{}{}
	if c.url != "" && c.cancel == nil {
		ctx, cancel := context.WithCancel(context.Background())
		c.cancel, c.done = cancel, make(chan struct{})
		go c.listen(ctx)
	}
	return sub
}

// Close ends the subscription and closes C.
func (sub *Subscription) Close() {
	c := sub.owner
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.subs[sub]; ok {
		delete(c.subs, sub)
		close(sub.c)
	}
}

// wake signals every subscription to topic ("" for all) without blocking.
func (c *Changes) wake(topic Topic) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for sub := range c.subs {
		if topic == "" || sub.topic == topic {
			select {
			case sub.c <- struct{}{}:
			default: // one wake-up is already waiting; it covers this one
			}
		}
	}
}

// close stops the listener and closes every subscription.
func (c *Changes) close() {
	c.mu.Lock()
	c.closed = true
	cancel, done := c.cancel, c.done
	for sub := range c.subs {
		delete(c.subs, sub)
		close(sub.c)
	}
	c.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// listen keeps one LISTEN connection up until ctx ends, reconnecting with jittered
// exponential backoff (reset after every connection that worked).
func (c *Changes) listen(ctx context.Context) {
	defer close(c.done)
	delay := listenMinBackoff
	for {
		connected, _ := c.session(ctx)
		c.live.Store(false)
		if connected {
			delay = listenMinBackoff
		}
		t := time.NewTimer(delay/2 + rand.N(delay/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(2*delay, listenMaxBackoff)
	}
}

// session connects, LISTENs, wakes everyone (whatever was sent while no connection
// listened is lost) and relays notifications until the connection fails or ctx ends.
func (c *Changes) session(ctx context.Context) (connected bool, err error) {
	cfg, err := pgx.ParseConfig(c.url)
	if err != nil {
		return false, err
	}
	cfg.RuntimeParams["application_name"] = ListenerApplicationName
	cctx, cancel := context.WithTimeout(ctx, listenIOTimeout)
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err == nil {
		_, err = conn.Exec(cctx, "LISTEN "+ChangesChannel)
	}
	cancel()
	if conn != nil {
		defer conn.Close(context.Background())
	}
	if err != nil {
		return false, err
	}
	c.live.Store(true)
	c.connects.Add(1)
	c.wake("")
	for {
		wctx, cancel := context.WithTimeout(ctx, listenPingAfter)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			c.wake(Topic(n.Payload))
			continue
		case ctx.Err() != nil:
			return true, ctx.Err()
		case !errors.Is(err, context.DeadlineExceeded) && !pgconn.Timeout(err):
			return true, err
		}
		// Quiet for a while: make sure the connection is still there.
		pctx, cancel := context.WithTimeout(ctx, listenIOTimeout)
		err = conn.Ping(pctx)
		cancel()
		if err != nil {
			return true, err
		}
	}
}
