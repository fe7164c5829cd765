-- Named leases: which process sharing the database does a job that must
-- run once (one webhook's deliveries, say), and until when.
CREATE TABLE leaders (
    name       TEXT    NOT NULL PRIMARY KEY,
    owner      TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
