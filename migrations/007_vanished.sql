-- Rows deleted before polling published them (their events are lost): the
-- relay adds each report's count (an upper bound) and records the seq range
-- and when, so that pgoutbox status, a separate process, can show it.
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS lost_deleted bigint NOT NULL DEFAULT 0;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS lost_deleted_from_seq bigint;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS lost_deleted_to_seq bigint;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS lost_deleted_at timestamptz;

---- create above / drop below ----

ALTER TABLE pgoutbox_state DROP COLUMN IF EXISTS lost_deleted, DROP COLUMN IF EXISTS lost_deleted_from_seq,
  DROP COLUMN IF EXISTS lost_deleted_to_seq, DROP COLUMN IF EXISTS lost_deleted_at;
