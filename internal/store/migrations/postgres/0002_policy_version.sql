-- 0002: the policy change counter (PostgreSQL; see migrations/sqlite/0002 for why it
-- exists). Triggers move it in the same transaction as every grant or namespace change,
-- whoever makes it, and send the topic "policy" on the toolgate_changes channel, which
-- PostgreSQL delivers to every replica's listener when the transaction commits
-- (internal/store/changes.go). The counter stays the source of truth; the notification
-- only wakes readers early.
--
-- toolgate_notify_change() is the generic form for later tables: a statement trigger
-- EXECUTE FUNCTION toolgate_notify_change('TOPIC') sends TOPIC (docs/storage.md).

CREATE TABLE policy_version (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version BIGINT NOT NULL
);
INSERT INTO policy_version (id, version) VALUES (1, 1);

CREATE FUNCTION toolgate_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('toolgate_changes', TG_ARGV[0]);
    RETURN NULL;
END
$$;

CREATE FUNCTION toolgate_bump_policy_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE policy_version SET version = version + 1 WHERE id = 1;
    RETURN NULL;
END
$$;

CREATE TRIGGER grants_bump AFTER INSERT OR UPDATE OR DELETE ON grants
    FOR EACH ROW EXECUTE FUNCTION toolgate_bump_policy_version();

-- Re-setting a namespace to the state it already has changes nothing, so it neither
-- moves the counter nor wakes anyone.
CREATE TRIGGER namespaces_insert_delete_bump AFTER INSERT OR DELETE ON namespaces
    FOR EACH ROW EXECUTE FUNCTION toolgate_bump_policy_version();
CREATE TRIGGER namespaces_update_bump AFTER UPDATE ON namespaces
    FOR EACH ROW WHEN (OLD.name IS DISTINCT FROM NEW.name OR OLD.enabled IS DISTINCT FROM NEW.enabled)
    EXECUTE FUNCTION toolgate_bump_policy_version();
-- One notification whenever the counter moves, whatever moved it (PostgreSQL folds
-- identical notifications of one transaction into one).
CREATE TRIGGER policy_version_notify AFTER UPDATE ON policy_version
    FOR EACH STATEMENT EXECUTE FUNCTION toolgate_notify_change('policy');
