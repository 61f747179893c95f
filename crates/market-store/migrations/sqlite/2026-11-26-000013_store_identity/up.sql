-- A random name of this database, drawn once: a server's saved version
-- (`serve --saved-version`) is used only by a server of the same database,
-- even after the version it saved was pruned from it.
CREATE TABLE store_identity (
    id TEXT PRIMARY KEY NOT NULL
);
INSERT INTO store_identity (id) VALUES (lower(hex(randomblob(16))));
