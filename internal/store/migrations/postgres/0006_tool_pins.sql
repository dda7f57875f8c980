-- 0006: upstream trust (PostgreSQL; see migrations/sqlite/0006 for what each table
-- holds and why the triggers exist). Names are BYTEA: a raw tool name may hold NUL,
-- which TEXT cannot.

CREATE TABLE tool_pins (
    server      BYTEA NOT NULL,
    tool        BYTEA NOT NULL,
    digest      TEXT NOT NULL,
    canonical   BYTEA NOT NULL,
    first_seen  TEXT NOT NULL,
    approved_by TEXT NOT NULL DEFAULT '',
    approved_at TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (server, tool)
);

CREATE TABLE tool_holds (
    server        BYTEA NOT NULL,
    tool          BYTEA NOT NULL,
    reason        TEXT NOT NULL,
    state         TEXT NOT NULL,
    digest        TEXT NOT NULL,
    canonical     BYTEA NOT NULL,
    pinned_digest TEXT NOT NULL DEFAULT '',
    findings      TEXT NOT NULL DEFAULT '[]',
    first_seen    TEXT NOT NULL,
    last_seen     TEXT NOT NULL,
    decided_by    TEXT NOT NULL DEFAULT '',
    decided_at    TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (server, tool)
);

CREATE TABLE upstream_trust (
    server     TEXT PRIMARY KEY,
    pin        TEXT NOT NULL DEFAULT 'tofu',
    hold_at    TEXT NOT NULL DEFAULT '',
    trusted    BOOLEAN NOT NULL DEFAULT FALSE,
    updated_at TEXT NOT NULL
);

CREATE FUNCTION toolgate_pin_clears_hold() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM tool_holds WHERE server = NEW.server AND tool = NEW.tool;
    RETURN NULL;
END
$$;

CREATE TRIGGER tool_pins_clear AFTER INSERT OR UPDATE ON tool_pins
    FOR EACH ROW EXECUTE FUNCTION toolgate_pin_clears_hold();
CREATE TRIGGER tool_pins_bump AFTER INSERT OR UPDATE OR DELETE ON tool_pins
    FOR EACH ROW EXECUTE FUNCTION toolgate_bump_policy_version();
CREATE TRIGGER tool_holds_insert_delete_bump AFTER INSERT OR DELETE ON tool_holds
    FOR EACH ROW EXECUTE FUNCTION toolgate_bump_policy_version();
CREATE TRIGGER tool_holds_update_bump AFTER UPDATE ON tool_holds
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.digest IS DISTINCT FROM NEW.digest)
    EXECUTE FUNCTION toolgate_bump_policy_version();
CREATE TRIGGER upstream_trust_insert_delete_bump AFTER INSERT OR DELETE ON upstream_trust
    FOR EACH ROW EXECUTE FUNCTION toolgate_bump_policy_version();
CREATE TRIGGER upstream_trust_update_bump AFTER UPDATE ON upstream_trust
    FOR EACH ROW WHEN (OLD.pin IS DISTINCT FROM NEW.pin OR OLD.hold_at IS DISTINCT FROM NEW.hold_at OR OLD.trusted IS DISTINCT FROM NEW.trusted)
    EXECUTE FUNCTION toolgate_bump_policy_version();
