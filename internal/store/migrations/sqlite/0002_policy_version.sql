-- 0002: a change counter for what the policy is compiled from (grants and namespace
-- switches). A long-running process reads this one row per request and reloads grants
-- and namespaces only when it moved, instead of re-reading both tables every time.
--
-- Triggers bump it, so it moves in the same transaction as the change whoever makes it:
-- every store method, a future one, or a hand edit with the sqlite3 shell. (SQLite's
-- PRAGMA data_version would not do: it is per connection, and every audit append
-- moves it.)

CREATE TABLE policy_version (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);
INSERT INTO policy_version (id, version) VALUES (1, 1);

CREATE TRIGGER grants_insert_bump AFTER INSERT ON grants
BEGIN
    UPDATE policy_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER grants_update_bump AFTER UPDATE ON grants
BEGIN
    UPDATE policy_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER grants_delete_bump AFTER DELETE ON grants
BEGIN
    UPDATE policy_version SET version = version + 1 WHERE id = 1;
END;

-- Re-setting a namespace to the state it already has changes nothing, so it does not
-- make every process reload.
CREATE TRIGGER namespaces_insert_bump AFTER INSERT ON namespaces
BEGIN
    UPDATE policy_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER namespaces_update_bump AFTER UPDATE ON namespaces
WHEN OLD.name IS NOT NEW.name OR OLD.enabled IS NOT NEW.enabled
BEGIN
    UPDATE policy_version SET version = version + 1 WHERE id = 1;
END;
CREATE TRIGGER namespaces_delete_bump AFTER DELETE ON namespaces
BEGIN
    UPDATE policy_version SET version = version + 1 WHERE id = 1;
END;
