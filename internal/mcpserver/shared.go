package mcpserver

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"
)

// SharedSessions makes a Handler's sessions valid on every Handler that shares it —
// the replicas of toolgate serve on one database — with no sticky routing. Each
// session id is then signed (HMAC-SHA256 under Key) and carries its principal, its
// expiry and its Turn's state (SessionStater); a Handler that does not hold the
// session serves it by opening its Turn again from that state (HandlerOptions.ResumeTurn).
// A DELETE is recorded through End, so that no Handler serves the session again.
type SharedSessions interface {
	// Key is the signing key, the same on every Handler that shares sessions.
	Key() []byte
	// Ended reports whether End recorded the session whose id hashes to idHash.
	Ended(ctx context.Context, idHash string) (bool, error)
	// End records that the session ended, until expires (when its id is refused anyway).
	End(ctx context.Context, idHash string, expires time.Time) error
}

// SessionStater is implemented by a Turn whose session another Handler may serve: its
// state is what HandlerOptions.ResumeTurn needs to open the same Turn there (for
// toolgate serve, the execution id and the catalogue hash). It is signed, not secret.
type SessionStater interface {
	SessionState() string
}

// DefaultSessionLifetime is how long a signed session id is valid by default.
const DefaultSessionLifetime = 24 * time.Hour

// maxEndedRemembered bounds the ids of sessions ended here that this Handler refuses to
// take up again (reaped, evicted, stale, deleted); past it the oldest are forgotten,
// and a client that kept such an id could have it served again (with a Turn opened
// under the grants as they are then, so with no authority it would not get anew).
const maxEndedRemembered = 1 << 16

// endTimeout bounds recording a DELETE for the other Handlers.
const endTimeout = 5 * time.Second

// sessionIDPrefix starts a signed session id.
const sessionIDPrefix = "tg1."

// sessionClaims is what a signed session id carries.
type sessionClaims struct {
	Principal string `json:"p"`
	State     string `json:"s"`
	Expires   int64  `json:"e"` // Unix seconds
	Nonce     string `json:"n"`
}

func sessionMAC(key []byte, payload string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("toolgate mcp session v1\n"))
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// sealSessionID returns a new signed session id.
func sealSessionID(key []byte, c sessionClaims) string {
	var n [12]byte
	_, _ = rand.Read(n[:])
	c.Nonce = hex.EncodeToString(n[:])
	b, _ := json.Marshal(c)
	payload := base64.RawURLEncoding.EncodeToString(b)
	return sessionIDPrefix + payload + "." + base64.RawURLEncoding.EncodeToString(sessionMAC(key, payload))
}

// maxSessionIDBytes bounds what is parsed of a session id offered by a client.
const maxSessionIDBytes = 2048

// openSessionID verifies a signed session id and returns its claims; ok is false for
// anything else (unsigned, forged, malformed, expired).
func openSessionID(key []byte, id string, now time.Time) (c sessionClaims, ok bool) {
	if len(id) > maxSessionIDBytes || !strings.HasPrefix(id, sessionIDPrefix) {
		return c, false
	}
	payload, mac, found := strings.Cut(id[len(sessionIDPrefix):], ".")
	if !found {
		return c, false
	}
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if err != nil || !hmac.Equal(got, sessionMAC(key, payload)) {
		return c, false
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil || json.Unmarshal(b, &c) != nil || now.Unix() >= c.Expires {
		return sessionClaims{}, false
	}
	return c, true
}

// sessionHash is what a session is recorded by when it ends: never the id itself.
func sessionHash(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:])
}

// endedSet remembers sessions ended on this Handler until their ids expire, bounded by
// maxEndedRemembered (oldest forgotten first). Guarded by registry.mu.
type endedSet struct {
	at    map[string]time.Time // hash -> expiry
	order []string             // hashes, oldest first
}

func (e *endedSet) add(hash string, expires time.Time) {
	if e.at == nil {
		e.at = map[string]time.Time{}
	}
	if _, ok := e.at[hash]; ok {
		return
	}
	if len(e.order) >= maxEndedRemembered {
		delete(e.at, e.order[0])
		e.order = e.order[1:]
	}
	e.at[hash] = expires
	e.order = append(e.order, hash)
}

func (e *endedSet) has(hash string, now time.Time) bool {
	exp, ok := e.at[hash]
	return ok && now.Before(exp)
}

// resume takes up a session another Handler sharing opts.Shared opened (or this one,
// before it ended the session's local state): the id must be signed, unexpired,
// the caller's, and never ended; its Turn is opened again from the id's state, and a
// state the principal's current grants no longer give (ResumeTurn's error) is a stale
// session: nil, answered 404 unknown_session, as the Handler answers a stale session
// it holds. The session is initialized (its initialize was answered elsewhere) but
// sends the client no request: the client's capabilities stayed where it initialized.
func (g *registry) resume(ctx context.Context, id, principal string) *httpSession {
	sh := g.opts.Shared
	if sh == nil || g.opts.ResumeTurn == nil {
		return nil
	}
	now := time.Now()
	c, ok := openSessionID(sh.Key(), id, now)
	if !ok || c.Principal != principal {
		return nil
	}
	hash := sessionHash(id)
	g.mu.Lock()
	ended := g.ended.has(hash, now)
	g.mu.Unlock()
	if ended {
		return nil
	}
	if gone, err := sh.Ended(ctx, hash); err != nil || gone {
		if err != nil {
			g.opts.Logger.WarnContext(ctx, "reading whether a session ended", "err", err)
		} else {
			g.mu.Lock()
			g.ended.add(hash, time.Unix(c.Expires, 0)) // asked once, not per request
			g.mu.Unlock()
		}
		return nil
	}
	turn, err := g.opts.ResumeTurn(ctx, principal, c.State)
	if err != nil || turn == nil {
		g.opts.Logger.InfoContext(ctx, "a session opened elsewhere is stale here", "err", err)
		return nil
	}
	// A principal that sees no tool holds as few sessions here as it may open
	// (MaxSessionsWithoutTools), whatever it opened on other replicas.
	quota := g.opts.MaxSessionsPerPrincipal
	if seesNoTool(ctx, turn) {
		quota = g.opts.MaxSessionsWithoutTools
	}
	s := newHTTPSession(turn, principal, g.opts.ServerInfo, g.opts.Instructions, g.opts.Logger, !g.opts.NoStateless)
	s.id, s.hash, s.expires = id, hash, time.Unix(c.Expires, 0)
	s.conn.pushes = g.pushes
	s.conn.initialized = true
	g.mu.Lock()
	if prev := g.sessions[id]; prev != nil || g.closed || g.ended.has(hash, now) {
		// Another request took it up meanwhile (or it ended, or the Handler closed).
		g.mu.Unlock()
		s.end()
		if prev != nil && !prev.isEnded() {
			return prev
		}
		return nil
	}
	own := g.owners[principal]
	if own == nil {
		own = &principalSessions{}
		g.owners[principal] = own
	}
	var victim *httpSession
	if own.live >= quota || len(g.sessions)+g.reserved >= g.opts.MaxSessions {
		e := own.idle.Front()
		if e == nil {
			if own.live == 0 {
				delete(g.owners, principal)
			}
			g.mu.Unlock()
			s.end()
			return nil
		}
		victim = e.Value.(*httpSession)
		g.dropLocked(victim)
		if g.owners[principal] == nil {
			g.owners[principal] = own
		}
	}
	own.live++
	s.slot = &sessionSlot{reg: g, principal: principal, owner: own, idleSince: now}
	s.slot.inIdle = g.idle.PushBack(s)
	s.slot.inOwnIdle = own.idle.PushBack(s)
	g.sessions[id] = s
	g.byHash[hash] = s
	g.mu.Unlock()
	if victim != nil {
		victim.end()
	}
	return s
}

// sealFor gives a new session its signed id when the Handler shares sessions.
func (g *registry) sealFor(s *httpSession, principal string) {
	sh := g.opts.Shared
	if sh == nil {
		return
	}
	state := ""
	if st, ok := s.turn.(SessionStater); ok {
		state = st.SessionState()
	}
	s.expires = time.Now().Add(g.opts.SessionLifetime).Truncate(time.Second)
	s.id = sealSessionID(sh.Key(), sessionClaims{Principal: principal, State: state, Expires: s.expires.Unix()})
	s.hash = sessionHash(s.id)
}

// deleted records a session a client ended with DELETE, so that no Handler sharing
// the sessions serves it again. A failure is logged: the session still ended here.
func (g *registry) deleted(ctx context.Context, s *httpSession) {
	if g.opts.Shared == nil || s.hash == "" {
		return
	}
	// Recorded even when the client hangs up right after sending the DELETE.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endTimeout)
	defer cancel()
	if err := g.opts.Shared.End(ctx, s.hash, s.expires); err != nil {
		g.opts.Logger.WarnContext(ctx, "recording an ended session for the other replicas", "err", err)
	}
}

// EndShared ends the sessions whose id hashes are given (ended on another Handler
// sharing the sessions, which recorded them through SharedSessions.End) and keeps
// them from being taken up here again. Hashes this Handler does not hold cost a map
// lookup each.
func (h *Handler) EndShared(hashes ...string) {
	g := h.reg
	var ended []*httpSession
	now := time.Now()
	g.mu.Lock()
	for _, hash := range hashes {
		if s := g.byHash[hash]; s != nil {
			g.dropLocked(s)
			ended = append(ended, s)
		} else {
			// The expiry is unknown here; remember it for the longest a session lives.
			g.ended.add(hash, now.Add(g.opts.SessionLifetime))
		}
	}
	g.mu.Unlock()
	endAll(ended)
}
