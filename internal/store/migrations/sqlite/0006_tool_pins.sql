-- 0006: upstream trust (docs/trust.md). tool_pins holds the one definition of each
-- (server, raw tool name) toolgate publishes; tool_holds the definitions held back for
-- a person to decide (new under pin "approve", changed since the pin, flagged);
-- upstream_trust each server's trust policy (pin mode, hold level, trusted).
--
-- Servers and tool names are BLOBs: a tool's name is the server's raw bytes (a stranger
-- chooses them, NUL included) and is compared and sorted byte for byte.
--
-- A pin written for a tool deletes its hold in the same statement (the trigger), so an
-- approval cannot leave a pin and a stale hold. Every change that decides what is
-- published moves the policy version, so every process re-reconciles its catalogues at
-- its next request; a hold whose last-seen time alone moved (every listing) does not.

CREATE TABLE tool_pins (
    server      BLOB NOT NULL,
    tool        BLOB NOT NULL,
    digest      TEXT NOT NULL,
    canonical   BLOB NOT NULL,
    first_seen  TEXT NOT NULL,
    approved_by TEXT NOT NULL DEFAULT '',
    approved_at TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (server, tool)
);

CREATE TABLE tool_holds (
    server        BLOB NOT NULL,
    tool          BLOB NOT NULL,
    reason        TEXT NOT NULL,
    state         TEXT NOT NULL,
    digest        TEXT NOT NULL,
    canonical     BLOB NOT NULL,
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
    trusted    INTEGER NOT NULL DEFAULT 0,
    updated_at TEXT NOT NULL
);

CREATE TRIGGER tool_pins_insert_clear AFTER INSERT ON tool_pins
BEGIN
    DELETE FROM tool_holds WHERE server = NEW.server AND tool = NEW.tool;
    UPDATE policy_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER tool_pins_update_clear AFTER UPDATE ON tool_pins
BEGIN
    DELETE FROM tool_holds WHERE server = NEW.server AND tool = NEW.tool;
    UPDATE policy_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER tool_pins_delete_bump AFTER DELETE ON tool_pins
BEGIN
    UPDATE policy_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER tool_holds_insert_bump AFTER INSERT ON tool_holds
BEGIN
    UPDATE policy_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER tool_holds_update_bump AFTER UPDATE ON tool_holds
WHEN OLD.state IS NOT NEW.state OR OLD.digest IS NOT NEW.digest
BEGIN
    UPDATE policy_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER tool_holds_delete_bump AFTER DELETE ON tool_holds
BEGIN
    UPDATE policy_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER upstream_trust_insert_bump AFTER INSERT ON upstream_trust
BEGIN
    UPDATE policy_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER upstream_trust_update_bump AFTER UPDATE ON upstream_trust
WHEN OLD.pin IS NOT NEW.pin OR OLD.hold_at IS NOT NEW.hold_at OR OLD.trusted IS NOT NEW.trusted
BEGIN
    UPDATE policy_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER upstream_trust_delete_bump AFTER DELETE ON upstream_trust
BEGIN
    UPDATE policy_version SET version = version + 1 WHERE id = 1;
END;
