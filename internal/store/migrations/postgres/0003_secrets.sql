-- 0003: sealed secrets of installed upstream servers (internal/keystore), PostgreSQL.
-- A row holds one AES-256-GCM blob bound to its (scope, server, name); the key that
-- opens it is the keystore.key file in each replica's data directory, never this
-- database (docs/keystore.md, docs/deployment.md).

CREATE TABLE secrets (
    scope      TEXT NOT NULL,
    server     TEXT NOT NULL,
    name       TEXT NOT NULL,
    sealed     BYTEA NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (scope, server, name)
);
