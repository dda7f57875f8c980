package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Installed upstream MCP servers (migration 0005; docs/management.md). The store keeps
// rows and counters; what a definition means, and every protocol rule, are the app's.

// DefaultWorkspaceID is the workspace every data directory has from its first open.
const DefaultWorkspaceID = "ws_000000000000000001"

// Scopes of an installation.
const (
	ScopeWorkspace = "workspace"
	ScopeUser      = "user"
)

// MaxBindings is how many recent callable ↔ raw name bindings are kept per server; an
// older one is dropped when a new one is recorded.
const MaxBindings = 64

// maxDefinition bounds one stored definition (mcpconfig bounds the config it came
// from to 1 MiB).
const maxDefinition = 1 << 20

var (
	workspaceIDRe = regexp.MustCompile(`^ws_[0-9]{18}$`)
	serverIDRe    = regexp.MustCompile(`^mcp_[0-9]{18}$`)
)

// MCPServer is one installed server.
type MCPServer struct {
	ID          string // "mcp_" + 18 digits, assigned by InsertMCPServer
	WorkspaceID string
	Scope       string // ScopeWorkspace or ScopeUser
	Name        string
	DisplayName string
	SourceKind  string
	// Definition is the normalised definition as JSON (no secret values).
	Definition  json.RawMessage
	Enabled     bool
	Implicit    bool // allow_implicit_invocation
	Required    bool
	Fingerprint string
	InstalledAt time.Time
	UpdatedAt   time.Time
}

func (m *MCPServer) check() error {
	switch {
	case !workspaceIDRe.MatchString(m.WorkspaceID):
		return fmt.Errorf("%w: workspace id %q", ErrInvalid, m.WorkspaceID)
	case m.Scope != ScopeWorkspace && m.Scope != ScopeUser:
		return fmt.Errorf("%w: scope %q", ErrInvalid, m.Scope)
	case len(m.Definition) == 0 || len(m.Definition) > maxDefinition || !json.Valid(m.Definition):
		return fmt.Errorf("%w: definition of %q is not a JSON value of at most %d bytes", ErrInvalid, m.Name, maxDefinition)
	}
	for _, f := range []struct{ name, v string }{{"name", m.Name}, {"source kind", m.SourceKind}, {"fingerprint", m.Fingerprint}} {
		if err := checkIdent(f.name, f.v, maxIdent); err != nil {
			return err
		}
	}
	return checkLine("display name", m.DisplayName, maxIdent)
}

// WorkspaceExists reports whether id names a workspace.
func (s *Store) WorkspaceExists(ctx context.Context, id string) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM workspaces WHERE id = $1`, id).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("reading workspace %q: %w", id, err)
	}
	return n == 1, nil
}

const mcpServerColumns = `id, workspace_id, scope, name, display_name, source_kind, definition, enabled,
	allow_implicit_invocation, required, fingerprint, installed_at, updated_at`

// InsertMCPServer installs m with a fresh id (m.ID is ignored) and returns it as
// stored. A server of that name already installed anywhere in the data directory
// wraps ErrConflict: one name is one namespace and one process per data directory.
func (s *Store) InsertMCPServer(ctx context.Context, m MCPServer) (MCPServer, error) {
	if err := m.check(); err != nil {
		return MCPServer{}, fmt.Errorf("installing server: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return MCPServer{}, fmt.Errorf("installing server %q: %w", m.Name, err)
	}
	defer tx.Rollback()
	var taken int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM mcp_servers WHERE name = $1`, m.Name).Scan(&taken); err != nil {
		return MCPServer{}, fmt.Errorf("installing server %q: %w", m.Name, err)
	}
	if taken > 0 {
		return MCPServer{}, fmt.Errorf("installing server %q: %w: a server of that name is installed", m.Name, ErrConflict)
	}
	var n int64
	if err := tx.QueryRowContext(ctx, `UPDATE id_sequences SET last = last + 1 WHERE kind = 'mcp' RETURNING last`).Scan(&n); err != nil {
		return MCPServer{}, fmt.Errorf("installing server %q: assigning an id: %w", m.Name, err)
	}
	m.ID = fmt.Sprintf("mcp_%018d", n)
	t := now()
	m.InstalledAt, m.UpdatedAt = t, t
	if _, err := tx.ExecContext(ctx, `INSERT INTO mcp_servers (`+mcpServerColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		m.ID, m.WorkspaceID, m.Scope, m.Name, m.DisplayName, m.SourceKind, string(m.Definition),
		b2i(m.Enabled), b2i(m.Implicit), b2i(m.Required), m.Fingerprint, formatTime(t), formatTime(t)); err != nil {
		if isUnique(err) {
			return MCPServer{}, fmt.Errorf("installing server %q: %w: a server of that name is installed", m.Name, ErrConflict)
		}
		if isForeignKey(err) {
			return MCPServer{}, fmt.Errorf("installing server %q: %w: no workspace %q", m.Name, ErrNotFound, m.WorkspaceID)
		}
		return MCPServer{}, fmt.Errorf("installing server %q: %w", m.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return MCPServer{}, fmt.Errorf("installing server %q: %w", m.Name, err)
	}
	return m, nil
}

// UpdateMCPServer replaces the definition, display name, required flag, fingerprint
// and policy of the installed server m.ID (its workspace, scope and name stay). An
// unknown id wraps ErrNotFound.
func (s *Store) UpdateMCPServer(ctx context.Context, m MCPServer) (MCPServer, error) {
	if err := m.check(); err != nil {
		return MCPServer{}, fmt.Errorf("updating server: %w", err)
	}
	t := now()
	res, err := s.db.ExecContext(ctx, `UPDATE mcp_servers SET display_name = $1, definition = $2, enabled = $3,
		allow_implicit_invocation = $4, required = $5, fingerprint = $6, updated_at = $7 WHERE id = $8`,
		m.DisplayName, string(m.Definition), b2i(m.Enabled), b2i(m.Implicit), b2i(m.Required), m.Fingerprint, formatTime(t), m.ID)
	if err != nil {
		return MCPServer{}, fmt.Errorf("updating server %q: %w", m.Name, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return MCPServer{}, fmt.Errorf("updating server %q (%s): %w", m.Name, m.ID, ErrNotFound)
	}
	return s.MCPServer(ctx, m.ID)
}

// MCPServer returns the installed server id; ErrNotFound when there is none.
func (s *Store) MCPServer(ctx context.Context, id string) (MCPServer, error) {
	if !serverIDRe.MatchString(id) {
		return MCPServer{}, fmt.Errorf("reading server %q: %w", id, ErrNotFound)
	}
	return s.oneMCPServer(ctx, `id = $1`, id)
}

// MCPServerByName returns the server installed under name; ErrNotFound when none is.
func (s *Store) MCPServerByName(ctx context.Context, name string) (MCPServer, error) {
	return s.oneMCPServer(ctx, `name = $1`, name)
}

func (s *Store) oneMCPServer(ctx context.Context, where string, arg any) (MCPServer, error) {
	ms, err := s.queryMCPServers(ctx, `WHERE `+where, arg)
	if err != nil {
		return MCPServer{}, err
	}
	if len(ms) == 0 {
		return MCPServer{}, fmt.Errorf("reading server %v: %w", arg, ErrNotFound)
	}
	return ms[0], nil
}

// ListMCPServers returns the servers available in workspace ws (its own and every
// user-scope one), by name; "" lists every installed server.
func (s *Store) ListMCPServers(ctx context.Context, ws string) ([]MCPServer, error) {
	if ws == "" {
		return s.queryMCPServers(ctx, `ORDER BY name`)
	}
	return s.queryMCPServers(ctx, `WHERE workspace_id = $1 OR scope = 'user' ORDER BY name`, ws)
}

func (s *Store) queryMCPServers(ctx context.Context, tail string, args ...any) ([]MCPServer, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+mcpServerColumns+` FROM mcp_servers `+tail, args...)
	if err != nil {
		return nil, fmt.Errorf("listing servers: %w", err)
	}
	defer rows.Close()
	var out []MCPServer
	for rows.Next() {
		var m MCPServer
		var def, inst, upd string
		var en, impl, req int
		if err := rows.Scan(&m.ID, &m.WorkspaceID, &m.Scope, &m.Name, &m.DisplayName, &m.SourceKind, &def,
			&en, &impl, &req, &m.Fingerprint, &inst, &upd); err != nil {
			return nil, fmt.Errorf("listing servers: %w", err)
		}
		m.Definition = json.RawMessage(def)
		m.Enabled, m.Implicit, m.Required = en == 1, impl == 1, req == 1
		if m.InstalledAt, err = parseTime(inst); err != nil {
			return nil, fmt.Errorf("listing servers: %s: %w", m.ID, err)
		}
		if m.UpdatedAt, err = parseTime(upd); err != nil {
			return nil, fmt.Errorf("listing servers: %s: %w", m.ID, err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing servers: %w", err)
	}
	return out, nil
}

// DeleteMCPServer uninstalls server id, with its catalogue and bindings (audit events
// naming it stay). An unknown id wraps ErrNotFound.
func (s *Store) DeleteMCPServer(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM mcp_servers WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("uninstalling server %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("uninstalling server %s: %w", id, ErrNotFound)
	}
	return nil
}

// MCPSnapshot returns snapshot_version: a counter that grows with every server and
// catalogue change (triggers, in the change's transaction) and every runtime state
// change (BumpMCPSnapshot). It never goes backwards.
func (s *Store) MCPSnapshot(ctx context.Context) (uint64, error) {
	var v int64
	if err := s.db.QueryRowContext(ctx, `SELECT version FROM mcp_snapshot WHERE id = 1`).Scan(&v); err != nil {
		return 0, fmt.Errorf("reading the snapshot version: %w", err)
	}
	return uint64(v), nil
}

// BumpMCPSnapshot moves snapshot_version by one and returns the new value.
func (s *Store) BumpMCPSnapshot(ctx context.Context) (uint64, error) {
	var v int64
	if err := s.db.QueryRowContext(ctx, `UPDATE mcp_snapshot SET version = version + 1 WHERE id = 1 RETURNING version`).Scan(&v); err != nil {
		return 0, fmt.Errorf("moving the snapshot version: %w", err)
	}
	return uint64(v), nil
}

// MCPCatalog is a server's persisted catalogue: every list as the upstream's raw JSON
// items, byte for byte.
type MCPCatalog struct {
	Version           uint64
	Digest            string
	Info              json.RawMessage
	Tools             []json.RawMessage
	Resources         []json.RawMessage
	ResourceTemplates []json.RawMessage
	Prompts           []json.RawMessage
	Truncated         bool
	Dropped           int
	FetchedAt         time.Time
}

// joinRaw writes items as one JSON array without re-encoding them, so their bytes are
// kept exactly; each must be a JSON value.
func joinRaw(items []json.RawMessage) (string, error) {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, it := range items {
		if !json.Valid(it) {
			return "", fmt.Errorf("%w: catalogue item %d is not JSON", ErrInvalid, i)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(it)
	}
	b.WriteByte(']')
	return b.String(), nil
}

// splitRaw reverses joinRaw; json.RawMessage keeps each element's bytes.
func splitRaw(s string) ([]json.RawMessage, error) {
	var items []json.RawMessage
	if err := json.Unmarshal([]byte(s), &items); err != nil {
		return nil, err
	}
	return items, nil
}

// LoadMCPCatalog returns the catalogue persisted for the server installed under name;
// ok is false when there is none (or no such server).
func (s *Store) LoadMCPCatalog(ctx context.Context, name string) (MCPCatalog, bool, error) {
	var c MCPCatalog
	var v int64
	var info, tools, res, tmpl, prompts, fetched string
	var trunc int
	err := s.db.QueryRowContext(ctx, `SELECT c.version, c.digest, c.info, c.tools, c.resources, c.resource_templates,
		c.prompts, c.truncated, c.dropped, c.fetched_at FROM mcp_catalogs c JOIN mcp_servers m ON m.id = c.server_id
		WHERE m.name = $1`, name).Scan(&v, &c.Digest, &info, &tools, &res, &tmpl, &prompts, &trunc, &c.Dropped, &fetched)
	if errors.Is(err, sql.ErrNoRows) {
		return MCPCatalog{}, false, nil
	}
	if err != nil {
		return MCPCatalog{}, false, fmt.Errorf("loading the catalogue of %q: %w", name, err)
	}
	c.Version, c.Truncated, c.Info = uint64(v), trunc == 1, json.RawMessage(info)
	for _, l := range []struct {
		dst *[]json.RawMessage
		src string
	}{{&c.Tools, tools}, {&c.Resources, res}, {&c.ResourceTemplates, tmpl}, {&c.Prompts, prompts}} {
		if *l.dst, err = splitRaw(l.src); err != nil {
			return MCPCatalog{}, false, fmt.Errorf("loading the catalogue of %q: %w", name, err)
		}
	}
	if c.FetchedAt, err = parseTime(fetched); err != nil {
		return MCPCatalog{}, false, fmt.Errorf("loading the catalogue of %q: %w", name, err)
	}
	return c, true, nil
}

// SaveMCPCatalog persists c for the server installed under name, replacing what was
// there. A server that is not installed (uninstalled while its refresh ran) is not an
// error: there is nothing to keep the catalogue for.
func (s *Store) SaveMCPCatalog(ctx context.Context, name string, c MCPCatalog) error {
	lists := make([]string, 4)
	for i, l := range [][]json.RawMessage{c.Tools, c.Resources, c.ResourceTemplates, c.Prompts} {
		var err error
		if lists[i], err = joinRaw(l); err != nil {
			return fmt.Errorf("saving the catalogue of %q: %w", name, err)
		}
	}
	info := string(c.Info)
	if info == "" {
		info = "{}"
	} else if !json.Valid(c.Info) {
		return fmt.Errorf("saving the catalogue of %q: %w: info is not JSON", name, ErrInvalid)
	}
	if err := checkLine("digest", c.Digest, maxIdent); c.Digest != "" && err != nil {
		return fmt.Errorf("saving the catalogue of %q: %w", name, err)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO mcp_catalogs (server_id, version, digest, info, tools, resources,
		resource_templates, prompts, truncated, dropped, fetched_at)
		SELECT id, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11 FROM mcp_servers WHERE name = $1
		ON CONFLICT (server_id) DO UPDATE SET version = excluded.version, digest = excluded.digest, info = excluded.info,
		tools = excluded.tools, resources = excluded.resources, resource_templates = excluded.resource_templates,
		prompts = excluded.prompts, truncated = excluded.truncated, dropped = excluded.dropped, fetched_at = excluded.fetched_at`,
		name, int64(c.Version), c.Digest, info, lists[0], lists[1], lists[2], lists[3], b2i(c.Truncated), c.Dropped, formatTime(c.FetchedAt))
	if err != nil {
		return fmt.Errorf("saving the catalogue of %q: %w", name, err)
	}
	return nil
}

// DeleteMCPCatalog removes the catalogue persisted for name; none is not an error.
func (s *Store) DeleteMCPCatalog(ctx context.Context, name string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM mcp_catalogs WHERE server_id IN (SELECT id FROM mcp_servers WHERE name = $1)`, name); err != nil {
		return fmt.Errorf("deleting the catalogue of %q: %w", name, err)
	}
	return nil
}

// MCPBinding is one recent binding of a callable name to a server's raw tool name.
type MCPBinding struct {
	Callable  string
	RawName   string
	FirstSeen time.Time
	LastSeen  time.Time
}

// RecordMCPBinding notes that callable was bound to raw (a tool of server id) at t,
// and keeps only the MaxBindings most recent bindings of the server. An unknown server
// is not an error (it was uninstalled meanwhile): nothing is recorded.
func (s *Store) RecordMCPBinding(ctx context.Context, serverID, callable, raw string, t time.Time) error {
	if err := checkIdent("callable", callable, maxIdent); err != nil {
		return fmt.Errorf("recording a binding: %w", err)
	}
	if err := checkIdent("raw tool name", raw, maxIdent); err != nil {
		return fmt.Errorf("recording a binding: %w", err)
	}
	ts := formatTime(t)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("recording a binding: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO mcp_bindings (server_id, callable, raw_name, first_seen, last_seen)
		SELECT id, $2, $3, $4, $4 FROM mcp_servers WHERE id = $1
		ON CONFLICT (server_id, callable) DO UPDATE SET raw_name = excluded.raw_name, last_seen = excluded.last_seen`,
		serverID, callable, raw, ts); err != nil {
		return fmt.Errorf("recording a binding: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM mcp_bindings WHERE server_id = $1 AND callable NOT IN
		(SELECT callable FROM mcp_bindings WHERE server_id = $1 ORDER BY last_seen DESC, callable LIMIT $2)`,
		serverID, MaxBindings); err != nil {
		return fmt.Errorf("recording a binding: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("recording a binding: %w", err)
	}
	return nil
}

// MCPBindings returns server id's recent bindings, most recent first.
func (s *Store) MCPBindings(ctx context.Context, serverID string) ([]MCPBinding, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT callable, raw_name, first_seen, last_seen FROM mcp_bindings
		WHERE server_id = $1 ORDER BY last_seen DESC, callable`, serverID)
	if err != nil {
		return nil, fmt.Errorf("listing bindings of %s: %w", serverID, err)
	}
	defer rows.Close()
	var out []MCPBinding
	for rows.Next() {
		var b MCPBinding
		var first, last string
		if err := rows.Scan(&b.Callable, &b.RawName, &first, &last); err != nil {
			return nil, fmt.Errorf("listing bindings of %s: %w", serverID, err)
		}
		if b.FirstSeen, err = parseTime(first); err != nil {
			return nil, err
		}
		if b.LastSeen, err = parseTime(last); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// isForeignKey reports a foreign key violation (SQLite's message, PostgreSQL's 23503).
func isForeignKey(err error) bool {
	s := err.Error()
	return strings.Contains(s, "FOREIGN KEY") || strings.Contains(s, "23503")
}

// isUnique reports a unique constraint violation (SQLite's message, PostgreSQL's 23505).
func isUnique(err error) bool {
	s := err.Error()
	return strings.Contains(s, "UNIQUE constraint") || strings.Contains(s, "23505")
}
