-- What operations need from the state table: when a relay last held the
-- pipeline (alive_at) and last had an event acked (last_publish_at), both
-- written every few seconds by the relay, not per event; and wal_start_xid,
-- the snapshot xmax read once the slot existed: every transaction at or
-- above it committed after the slot's consistent point, so WAL mode
-- published it. Retention deletes a row below the published floor only if
-- its transaction is at or above wal_start_xid.
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS alive_at timestamptz;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS last_publish_at timestamptz;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS wal_start_xid xid8;

---- create above / drop below ----

ALTER TABLE pgoutbox_state DROP COLUMN IF EXISTS alive_at, DROP COLUMN IF EXISTS last_publish_at,
  DROP COLUMN IF EXISTS wal_start_xid;
