-- A dead letter is recorded once per event. A session that failed after
-- recording one met the event again and, before this migration, recorded it
-- again: each copy held the aggregate and was replayed, so the event was
-- published once per copy. Existing copies are kept, not deleted: each extra
-- copy points at the entry kept for its event (the first resolved one, else
-- the first), and an extra copy still open is resolved as a duplicate, so a
-- replay publishes the event once.
ALTER TABLE pgoutbox_dead_letter ADD COLUMN IF NOT EXISTS duplicate_of bigint;

WITH ranked AS (
  SELECT id, first_value(id) OVER w AS kept
  FROM pgoutbox_dead_letter
  WHERE event_id IS NOT NULL AND event_id <> '' AND duplicate_of IS NULL
  WINDOW w AS (PARTITION BY pipeline, outbox_table, event_id ORDER BY replayed_at IS NULL, id)
)
UPDATE pgoutbox_dead_letter d
SET duplicate_of = ranked.kept,
    replayed_at  = coalesce(d.replayed_at, now()),
    resolution   = CASE WHEN d.replayed_at IS NULL THEN 'duplicate' ELSE d.resolution END
FROM ranked
WHERE d.id = ranked.id AND ranked.kept <> d.id;

CREATE UNIQUE INDEX IF NOT EXISTS pgoutbox_dead_letter_once
  ON pgoutbox_dead_letter (pipeline, outbox_table, event_id)
  WHERE duplicate_of IS NULL AND event_id IS NOT NULL AND event_id <> '';

---- create above / drop below ----

DROP INDEX IF EXISTS pgoutbox_dead_letter_once;
ALTER TABLE pgoutbox_dead_letter DROP COLUMN IF EXISTS duplicate_of;
