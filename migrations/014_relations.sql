-- stopped_reason, stopped_at: why the relay last stopped on a problem that
-- retrying cannot fix (a row of a relation it does not recognise, a
-- publication it may not fix), for status; cleared when a session starts.
-- gap_files: the outbox table's files when the deleted-row account was
-- saved (each relation that holds rows, with its relfilenode): a TRUNCATE,
-- a rewrite, or a partition dropped, detached or attached since changes
-- them, and the saved account is not judged across it.
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS stopped_reason text;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS stopped_at timestamptz;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS gap_files text;

---- create above / drop below ----

ALTER TABLE pgoutbox_state DROP COLUMN IF EXISTS stopped_reason, DROP COLUMN IF EXISTS stopped_at,
  DROP COLUMN IF EXISTS gap_files;
