-- 0004: MCP sessions that ended, so that no replica serves them again. A session id of
-- toolgate serve is signed and valid on every replica that shares this database
-- (docs/deployment.md, "Sessions on any replica"); a DELETE records the id's hash here
-- until the id would have expired anyway. Only the hash is stored.

CREATE TABLE ended_sessions (
    id_hash    TEXT PRIMARY KEY,
    ended_at   TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE INDEX ended_sessions_ended_at ON ended_sessions (ended_at);
CREATE INDEX ended_sessions_expires_at ON ended_sessions (expires_at);
