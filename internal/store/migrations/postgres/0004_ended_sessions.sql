-- 0004: MCP sessions that ended (see migrations/sqlite/0004). An insert sends the topic
-- "sessions" on toolgate_changes, so replicas holding such a session end it at once.

CREATE TABLE ended_sessions (
    id_hash    TEXT PRIMARY KEY,
    ended_at   TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE INDEX ended_sessions_ended_at ON ended_sessions (ended_at);
CREATE INDEX ended_sessions_expires_at ON ended_sessions (expires_at);

CREATE TRIGGER ended_sessions_notify AFTER INSERT ON ended_sessions
    FOR EACH STATEMENT EXECUTE FUNCTION toolgate_notify_change('sessions');
