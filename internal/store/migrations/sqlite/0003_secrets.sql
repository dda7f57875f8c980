-- 0003: sealed secrets of installed upstream servers (internal/keystore). A row holds
-- one AES-256-GCM blob bound to its (scope, server, name); the key that opens it is the
-- data directory's keystore.key file, never this database (docs/keystore.md).

CREATE TABLE secrets (
    scope      TEXT NOT NULL,
    server     TEXT NOT NULL,
    name       TEXT NOT NULL,
    sealed     BLOB NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (scope, server, name)
);
