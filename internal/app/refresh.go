package app

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/store"
)

// policyState lets refresh skip re-reading grants and namespace switches when nothing
// changed. The store keeps a policy version that every grant or namespace change moves
// in its own transaction, whichever process makes it (store.PolicyVersion); refresh
// reads that one row first and reloads only when it differs from the version the
// kernel's current policy was loaded at. Before, every /v1/tools/invoke request
// re-read and compared both tables (about a quarter of the request's CPU).
//
// Why this keeps the promise that the next request sees a change made elsewhere: the
// version is read before the grants and namespaces, so the policy loaded is never older
// than the version remembered with it. A change that lands in between makes the next
// refresh reload once more; none can be missed.
type policyState struct {
	// loads counts full reloads (grants and namespaces read from the store), and
	// reads every read of the policy version, for tests.
	loads, reads atomic.Int64

	// Guarded by App.mu.
	loaded bool  // the kernel holds a policy read from the store
	ver    int64 // the store's policy version read before that policy's grants
}

// policyCurrent reads the store's policy version and reports whether the kernel
// already holds the policy loaded at it, in which case refresh has nothing to do.
func (a *App) policyCurrent(ctx context.Context) (ver int64, current bool, err error) {
	a.pol.reads.Add(1)
	ver, err = a.st.PolicyVersion(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("loading grants: %w", err)
	}
	a.mu.Lock()
	current = a.pol.loaded && a.pol.ver == ver
	a.mu.Unlock()
	if !current {
		a.pol.loads.Add(1)
	}
	return ver, current, nil
}

// policyLoaded records that the kernel now holds the grants and namespaces read after
// version ver. It runs with a.mu held, when a refresh applied its reads; a refresh
// that failed (a grant that does not compile) records nothing, so the next one tries
// again and keeps failing closed until the grant is fixed.
func (a *App) policyLoaded(ver int64) { a.pol.loaded, a.pol.ver = true, ver }

// recheckGrants runs with a.mu held, just before a refresh applies what it read. That
// refresh compared its grants with the applied ones before taking the lock, and skipped
// compiling if they were equal; another refresh may have applied different grants since
// (grants changed and changed back between the two reads). Applying "no change" then
// would leave the kernel on grants the store no longer has, and since the version read
// would be recorded as loaded, no later refresh would correct it. So the comparison is
// repeated here, and the grants compiled if it no longer holds (a rare race; the
// policy is compiled in memory, no I/O happens under the lock).
func (a *App) recheckGrants(grants []policy.Grant, set *policy.Set) (*policy.Set, error) {
	if set != nil || reflect.DeepEqual(grants, a.lastGrants) {
		return set, nil
	}
	set, err := policy.Compile(grants)
	if err != nil {
		return nil, fmt.Errorf("%w (fix or remove it with `toolgate grant rm`)", err)
	}
	return set, nil
}

// watchPolicy reloads the policy as soon as the store reports that another process
// changed grants or namespace switches (store.Changes: PostgreSQL's LISTEN/NOTIFY; a
// reconnection of the listener counts as a change, since notifications sent meanwhile
// are lost). It does not replace the version read every refresh does: a notification
// arrives shortly after the change committed, and a decision taken in between must
// still see it. What it buys is that a change made on another replica is usually
// loaded before the next call arrives, so that call pays one version read and no
// reload, and that open sessions' Stale checks find the new policy at once.
//
// On SQLite the store does not notify and nothing is started.
func (a *App) watchPolicy() {
	changes := a.st.Changes()
	if !changes.Notifies() {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	sub := changes.Subscribe(store.TopicPolicy)
	done := make(chan struct{})
	a.stopWatch = func() {
		sub.Close()
		cancel()
		<-done
	}
	go func() {
		defer close(done)
		for range sub.C {
			if err := a.refresh(ctx); err != nil && ctx.Err() == nil {
				a.log.Warn("re-reading grants after a change notification", "err", err)
			}
		}
	}()
}

// requestKey marks a context as one request of a surface (Request).
type requestKey struct{}

// requestRefresh is one request's refresh: done once, its result shared.
type requestRefresh struct {
	app  *App
	once sync.Once
	err  error
}

// Request returns ctx for one request a surface serves (an HTTP request of toolgate
// serve): every step of it that brings the policy up to date — opening a turn (the HTTP
// API, a stateless MCP request, an initialize), checking whether a session went stale,
// each call (a batch's included) — shares one read of the store, made by the first of
// them. Without it each step reads (one query when nothing changed), which is what
// surfaces with long-lived turns and no request boundary get: a bridge or toolgate mcp
// reads before every call. A change made after the request's read reaches the next
// request; the request itself is decided by the grants as they were when it began.
func (a *App) Request(ctx context.Context) context.Context {
	return context.WithValue(ctx, requestKey{}, &requestRefresh{app: a})
}
