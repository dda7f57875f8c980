package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/datadir"
	"github.com/toolgate/toolgate/internal/exectoken"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/store"
)

// Admin is a data directory opened for the management commands (grant, token, audit,
// escalations, namespaces): its store and its token key, without a kernel. It compiles
// no policy, so a grant the kernel refuses to compile can still be listed and removed.
// The commands call it instead of holding a store of their own.
type Admin struct {
	st *store.Store
}

// Errors the management commands branch on.
var (
	// ErrNotFound is wrapped when a grant or escalation id names nothing.
	ErrNotFound = store.ErrNotFound
	// ErrInvalidToken is wrapped by every token that does not verify (forged,
	// expired, malformed).
	ErrInvalidToken = exectoken.ErrInvalid
	// ErrUnsafe is wrapped when the data directory or a secret file in it is open to
	// others (docs/storage.md, "Permissions").
	ErrUnsafe = datadir.ErrUnsafe
)

// MaxTokenBytes is the longest token VerifyToken reads; longer is invalid.
const MaxTokenBytes = exectoken.MaxLen

// OpenAdmin opens (creating if needed) the data directory's store: the embedded SQLite
// store in dataDir, or the PostgreSQL database databaseURL names (CheckDatabaseURL).
// Administrative changes (grants, revocations, switches) are rare and must not be
// lost, so they always commit at power durability.
func OpenAdmin(ctx context.Context, dataDir, databaseURL string) (*Admin, error) {
	st, err := store.OpenDatabase(ctx, dataDir, databaseURL, store.WithDurability(store.DurabilityPower))
	if err != nil {
		return nil, err
	}
	return &Admin{st: st}, nil
}

// EnvDatabaseURL names the environment variable that selects a PostgreSQL store when no
// --database-url is given (docs/deployment.md).
const EnvDatabaseURL = store.EnvDatabaseURL

// CheckDatabaseURL refuses a value that is not a PostgreSQL URL; its errors never repeat
// the value (it may hold a password).
func CheckDatabaseURL(raw string) error { return store.CheckDatabaseURL(raw) }

// EnvAuditDurability names the environment variable that selects the audit durability
// level when no --audit-durability is given (docs/performance.md).
const EnvAuditDurability = "TOOLGATE_AUDIT_DURABILITY"

// Durability is how far a call's audit event has travelled before its tool runs.
type Durability = store.Durability

// ParseDurability accepts "process", "power", or "" (the default, process).
func ParseDurability(s string) (Durability, error) { return store.ParseDurability(s) }

// Close closes the store.
func (m *Admin) Close() error { return m.st.Close() }

// ValidateGrant checks that a grant takes effect exactly as written (docs/kernel.md,
// "Grants"): what AddGrant refuses, without opening anything.
func ValidateGrant(g policy.Grant) error { return store.ValidateGrant(g) }

// AddGrant checks a grant (ValidateGrant) and stores it, returning it with its id.
func (m *Admin) AddGrant(ctx context.Context, g policy.Grant) (policy.Grant, error) {
	if err := ValidateGrant(g); err != nil {
		return policy.Grant{}, err
	}
	return m.st.AddGrant(ctx, g)
}

// Grants lists every grant, oldest first.
func (m *Admin) Grants(ctx context.Context) ([]policy.Grant, error) { return m.st.ListGrants(ctx) }

// RemoveGrant deletes a grant; an unknown id wraps ErrNotFound.
func (m *Admin) RemoveGrant(ctx context.Context, id string) error { return m.st.RemoveGrant(ctx, id) }

// Namespaces returns the namespaces that were switched (absent means enabled).
func (m *Admin) Namespaces(ctx context.Context) (map[string]bool, error) {
	return m.st.Namespaces(ctx)
}

// SetNamespaceEnabled switches a namespace on or off for turns opened afterwards.
func (m *Admin) SetNamespaceEnabled(ctx context.Context, ns string, on bool) error {
	return m.st.SetNamespaceEnabled(ctx, ns, on)
}

// Escalation is one escalation as the store keeps it.
type Escalation = store.Escalation

// Escalation statuses (and the two decisions).
const (
	EscalationPending  = store.EscalationPending
	EscalationApproved = store.EscalationApproved
	EscalationDenied   = store.EscalationDenied
)

// Escalations lists the escalations with status ("" for all), oldest first.
func (m *Admin) Escalations(ctx context.Context, status string) ([]Escalation, error) {
	return m.st.ListEscalations(ctx, status)
}

// ResolveEscalation records a person's decision (EscalationApproved or
// EscalationDenied) once; an unknown id wraps ErrNotFound.
func (m *Admin) ResolveEscalation(ctx context.Context, id, decision, by, note string) error {
	return m.st.ResolveEscalation(ctx, id, decision, by, note)
}

// Audit lists the events f selects, oldest first.
func (m *Admin) Audit(ctx context.Context, f audit.Filter) ([]audit.Event, error) {
	return m.st.ListAudit(ctx, f)
}

// AuditHead is the newest event's seq and hash (0, "" for an empty log).
func (m *Admin) AuditHead(ctx context.Context) (seq int64, hash string, err error) {
	return m.st.AuditHead(ctx)
}

// auditPage is how many events one query of VerifyAudit reads, so a verification
// never holds the whole log in memory.
const auditPage = 1000

// AuditAnchor is a head recorded by an earlier verification: the chain must still pass
// through exactly that event.
type AuditAnchor struct {
	Seq  int64
	Hash string
}

// AuditHeadInfo is what a verification found: how many events, and the head.
type AuditHeadInfo struct {
	Events int64
	Seq    int64
	Hash   string
}

// VerifyAudit checks the whole hash chain (docs/audit.md), and with an anchor that the
// chain still holds it. A broken chain is an *audit.ChainError naming the first seq
// that does not verify.
func (m *Admin) VerifyAudit(ctx context.Context, anchor *AuditAnchor) (AuditHeadInfo, error) {
	var v audit.Verifier
	var after int64
	for {
		evs, err := m.st.ListAudit(ctx, audit.Filter{AfterSeq: after, Limit: auditPage})
		if err != nil {
			return AuditHeadInfo{}, err
		}
		for i := range evs {
			if err := v.Add(&evs[i]); err != nil {
				return AuditHeadInfo{}, err
			}
			if anchor != nil && evs[i].Seq == anchor.Seq && evs[i].Hash != anchor.Hash {
				return AuditHeadInfo{}, &audit.ChainError{Seq: anchor.Seq,
					Reason: "its hash differs from the anchor: the chain was rewritten since the anchor was recorded"}
			}
		}
		if len(evs) < auditPage {
			break
		}
		after = evs[len(evs)-1].Seq
	}
	n, seq, hash := v.Head()
	if anchor != nil && seq < anchor.Seq {
		return AuditHeadInfo{}, &audit.ChainError{Seq: seq + 1,
			Reason: fmt.Sprintf("the chain ends at seq %d but the anchor is seq %d: the newest events were removed", seq, anchor.Seq)}
	}
	return AuditHeadInfo{Events: n, Seq: seq, Hash: hash}, nil
}

// MintToken issues an execution token for principal and session (a random "s_…"
// session when empty) valid for ttl (a whole number of seconds, at most MaxTokenTTL).
func (m *Admin) MintToken(ctx context.Context, principal, session string, ttl time.Duration) (string, error) {
	key, err := m.st.Key(ctx, exectoken.StoreKeyName)
	if err != nil {
		return "", fmt.Errorf("reading the token key: %w", err)
	}
	if session == "" {
		var b [12]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
		session = "s_" + hex.EncodeToString(b[:])
	}
	return mintToken(key, principal, session, ttl)
}

// TokenClaims is whom a token identifies, and for how long.
type TokenClaims = exectoken.Claims

// VerifyToken checks a token against this data directory's key; a token that does not
// verify wraps ErrInvalidToken.
func (m *Admin) VerifyToken(ctx context.Context, tok string) (TokenClaims, error) {
	key, err := m.st.Key(ctx, exectoken.StoreKeyName)
	if err != nil {
		return TokenClaims{}, fmt.Errorf("reading the token key: %w", err)
	}
	return exectoken.Verify(key, tok, time.Now())
}

// mintToken is the one place execution tokens are made: the lifetime's bounds, then
// the signature.
func mintToken(key []byte, principal, session string, ttl time.Duration) (string, error) {
	switch {
	case ttl <= 0:
		return "", fmt.Errorf("minting a token: ttl must be positive, got %s", ttl)
	case ttl < time.Second:
		return "", fmt.Errorf("minting a token: ttl %s is shorter than the one-second precision of tokens", ttl)
	case ttl > MaxTokenTTL:
		return "", fmt.Errorf("minting a token: ttl %s is longer than the %s limit", ttl, MaxTokenTTL)
	}
	now := time.Now()
	return exectoken.Mint(key, exectoken.Claims{Principal: principal, Session: session, IssuedAt: now, Expires: now.Add(ttl)})
}
