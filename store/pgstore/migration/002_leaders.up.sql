-- Named leases: which process sharing the database does a job that must
-- run once (one webhook's deliveries, say), and until when.
CREATE TABLE leaders (
    name       text        NOT NULL PRIMARY KEY,
    owner      text        NOT NULL,
    expires_at timestamptz NOT NULL
);
