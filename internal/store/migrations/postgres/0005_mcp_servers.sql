-- 0005: installed upstream MCP servers, PostgreSQL (see migrations/sqlite/0005 for what
-- each table is). Triggers move snapshot_version in the same transaction as every
-- server or catalogue change and send the topic "mcp" on the toolgate_changes channel.

CREATE TABLE id_sequences (
    kind TEXT PRIMARY KEY,
    last BIGINT NOT NULL
);
INSERT INTO id_sequences (kind, last) VALUES ('ws', 1), ('mcp', 0);

CREATE TABLE workspaces (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    is_default INTEGER NOT NULL CHECK (is_default IN (0, 1)),
    created_at TEXT NOT NULL
);
INSERT INTO workspaces (id, name, is_default, created_at)
    VALUES ('ws_000000000000000001', 'default', 1, to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'));

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
    version            BIGINT NOT NULL,
    digest             TEXT NOT NULL,
    info               TEXT NOT NULL,
    tools              TEXT NOT NULL,
    resources          TEXT NOT NULL,
    resource_templates TEXT NOT NULL,
    prompts            TEXT NOT NULL,
    truncated          INTEGER NOT NULL CHECK (truncated IN (0, 1)),
    dropped            BIGINT NOT NULL,
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

CREATE INDEX audit_events_resource ON audit_events (resource, seq);

CREATE TABLE mcp_snapshot (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version BIGINT NOT NULL
);
INSERT INTO mcp_snapshot (id, version) VALUES (1, 0);

CREATE FUNCTION toolgate_bump_mcp_snapshot() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE mcp_snapshot SET version = version + 1 WHERE id = 1;
    RETURN NULL;
END
$$;

CREATE TRIGGER mcp_servers_bump AFTER INSERT OR UPDATE OR DELETE ON mcp_servers
    FOR EACH ROW EXECUTE FUNCTION toolgate_bump_mcp_snapshot();
CREATE TRIGGER mcp_catalogs_insert_bump AFTER INSERT ON mcp_catalogs
    FOR EACH ROW EXECUTE FUNCTION toolgate_bump_mcp_snapshot();
CREATE TRIGGER mcp_catalogs_update_bump AFTER UPDATE ON mcp_catalogs
    FOR EACH ROW WHEN (OLD.version IS DISTINCT FROM NEW.version OR OLD.digest IS DISTINCT FROM NEW.digest)
    EXECUTE FUNCTION toolgate_bump_mcp_snapshot();
CREATE TRIGGER mcp_snapshot_notify AFTER UPDATE ON mcp_snapshot
    FOR EACH STATEMENT EXECUTE FUNCTION toolgate_notify_change('mcp');

-- An install, an uninstall and a change of enabled or allow_implicit_invocation also
-- move the policy version (see migrations/sqlite/0005), which sends "policy".
CREATE TRIGGER mcp_servers_insert_delete_policy AFTER INSERT OR DELETE ON mcp_servers
    FOR EACH ROW EXECUTE FUNCTION toolgate_bump_policy_version();
CREATE TRIGGER mcp_servers_update_policy AFTER UPDATE ON mcp_servers
    FOR EACH ROW WHEN (OLD.enabled IS DISTINCT FROM NEW.enabled
        OR OLD.allow_implicit_invocation IS DISTINCT FROM NEW.allow_implicit_invocation)
    EXECUTE FUNCTION toolgate_bump_policy_version();
