-- polled_until: the WAL's end when a WAL session under at-least-once
-- delivery took over from a poll phase; every row that phase published
-- committed before it. Until the slot's confirmed position passes it, a
-- stream may replay rows polling published: a WAL session in any process
-- (a restart, the other relay of a pair) then reads them from the table
-- and does not send them again.
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS polled_until pg_lsn;

---- create above / drop below ----

ALTER TABLE pgoutbox_state DROP COLUMN IF EXISTS polled_until;
