-- 0005: installed upstream MCP servers (docs/management.md, docs/storage.md).
--
-- workspaces: a data directory's workspaces; the default one is created here, so it
-- exists from the first open. mcp_servers: one row per installation, addressed by
-- (workspace_id, scope, name) or its id; definition is mcpconfig's normalised server as
-- JSON (secret refs and keyed digests, never a value). The host runs one process per
-- server name per data directory and a server's tools are "<name>.<tool>" in the one
-- kernel, so a name is installed once per data directory (mcp_servers_name).
-- mcp_catalogs: the host's persisted catalogues (host.CatalogStore), the upstream's
-- list items as raw JSON arrays. mcp_bindings: which callable names were bound to which
-- raw tool names, a bounded recent list per server. id_sequences: the per-kind counters
-- behind "ws_" and "mcp_" ids. mcp_snapshot: snapshot_version, moved by triggers in the
-- same transaction as every server or catalogue change, and by the hosting process for
-- runtime state changes; it never goes backwards.

CREATE TABLE id_sequences (
    kind TEXT PRIMARY KEY,
    last INTEGER NOT NULL
);
INSERT INTO id_sequences (kind, last) VALUES ('ws', 1), ('mcp', 0);

CREATE TABLE workspaces (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    is_default INTEGER NOT NULL CHECK (is_default IN (0, 1)),
    created_at TEXT NOT NULL
);
INSERT INTO workspaces (id, name, is_default, created_at)
    VALUES ('ws_000000000000000001', 'default', 1, strftime('%Y-%m-%dT%H:%M:%S', 'now') || '.000000Z');

CREATE TABLE mcp_servers (
    id                        TEXT PRIMARY KEY,
    workspace_id              TEXT NOT NULL REFERENCES workspaces (id),
    scope                     TEXT NOT NULL CHECK (scope IN ('workspace', 'user')),
    name                      TEXT NOT NULL,
    display_name              TEXT NOT NULL,
    source_kind               TEXT NOT NULL,
    definition                TEXT NOT NULL,
    enabled                   INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    allow_implicit_invocation INTEGER NOT NULL CHECK (allow_implicit_invocation IN (0, 1)),
    required                  INTEGER NOT NULL CHECK (required IN (0, 1)),
    fingerprint               TEXT NOT NULL,
    installed_at              TEXT NOT NULL,
    updated_at                TEXT NOT NULL,
    UNIQUE (workspace_id, scope, name)
);
CREATE UNIQUE INDEX mcp_servers_name ON mcp_servers (name);

CREATE TABLE mcp_catalogs (
    server_id          TEXT PRIMARY KEY REFERENCES mcp_servers (id) ON DELETE CASCADE,
    version            INTEGER NOT NULL,
    digest             TEXT NOT NULL,
    info               TEXT NOT NULL,
    tools              TEXT NOT NULL,
    resources          TEXT NOT NULL,
    resource_templates TEXT NOT NULL,
    prompts            TEXT NOT NULL,
    truncated          INTEGER NOT NULL CHECK (truncated IN (0, 1)),
    dropped            INTEGER NOT NULL,
    fetched_at         TEXT NOT NULL
);

CREATE TABLE mcp_bindings (
    server_id  TEXT NOT NULL REFERENCES mcp_servers (id) ON DELETE CASCADE,
    callable   TEXT NOT NULL,
    raw_name   TEXT NOT NULL,
    first_seen TEXT NOT NULL,
    last_seen  TEXT NOT NULL,
    PRIMARY KEY (server_id, callable)
);
CREATE INDEX mcp_bindings_recent ON mcp_bindings (server_id, last_seen);

-- mcp/server/details reads a server's recent audit events by resource.
CREATE INDEX audit_events_resource ON audit_events (resource, seq);

CREATE TABLE mcp_snapshot (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);
INSERT INTO mcp_snapshot (id, version) VALUES (1, 0);

CREATE TRIGGER mcp_servers_insert_bump AFTER INSERT ON mcp_servers
BEGIN
    UPDATE mcp_snapshot SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER mcp_servers_update_bump AFTER UPDATE ON mcp_servers
BEGIN
    UPDATE mcp_snapshot SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER mcp_servers_delete_bump AFTER DELETE ON mcp_servers
BEGIN
    UPDATE mcp_snapshot SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER mcp_catalogs_insert_bump AFTER INSERT ON mcp_catalogs
BEGIN
    UPDATE mcp_snapshot SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER mcp_catalogs_update_bump AFTER UPDATE ON mcp_catalogs
WHEN OLD.version IS NOT NEW.version OR OLD.digest IS NOT NEW.digest
BEGIN
    UPDATE mcp_snapshot SET version = version + 1 WHERE id = 1;
END;

-- What a turn may publish depends on the installed servers and their policy, so an
-- install, an uninstall and a change of enabled or allow_implicit_invocation also move
-- the policy version: every process brings its kernel's upstream tools up to date at
-- its next refresh, whichever process made the change.
CREATE TRIGGER mcp_servers_insert_policy AFTER INSERT ON mcp_servers
BEGIN
    UPDATE policy_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER mcp_servers_update_policy AFTER UPDATE ON mcp_servers
WHEN OLD.enabled IS NOT NEW.enabled OR OLD.allow_implicit_invocation IS NOT NEW.allow_implicit_invocation
BEGIN
    UPDATE policy_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER mcp_servers_delete_policy AFTER DELETE ON mcp_servers
BEGIN
    UPDATE policy_version SET version = version + 1 WHERE id = 1;
END;
