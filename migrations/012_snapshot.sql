-- snapshot_pending: the pipeline was asked to publish the rows already in
-- its table (--snapshot-mode initial) and that has not finished. It is set
-- before the first slot is created and cleared only once every row of the
-- snapshot is acknowledged, so a crash in between redoes the snapshot at
-- the next start (rows sent again, none lost).
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS snapshot_pending boolean NOT NULL DEFAULT false;

---- create above / drop below ----

ALTER TABLE pgoutbox_state DROP COLUMN IF EXISTS snapshot_pending;
