-- The outbox table is not a versioned migration: a database can hold any
-- number of outbox tables, and a team's existing table must not be
-- rewritten. EnsureOutbox (outbox.go) creates or adapts each table on
-- every pgoutbox migrate. This file keeps the version numbers of databases
-- migrated before that change.
SELECT 1;

---- create above / drop below ----

SELECT 1;
