-- Where the account of rows deleted before publication stands, kept across
-- restarts so that a poll phase also judges the rows written while no
-- relay ran, or after the last position the WAL covered (a slot lost while
-- the relay was down):
--   gap_seq: every seq position up to it is accounted for (published, or
--     counted in gap_unseen).
--   gap_known_seq, gap_known: the rows known then (seq at or below
--     gap_known_seq, without a seq, or marked published), plus the rows
--     published since above gap_known_seq, added before they are produced.
--   gap_deletes: the table's delete counter (n_tup_del) the account starts
--     from; gap_stats_reset: the database's statistics reset time then, so
--     that a reset is seen and the gap is not judged.
--   gap_unseen, gap_reported: positions up to gap_seq that no row holds, and
--     rows reported lost, since gap_deletes.
--   gap_batch_from, gap_batch_to: the seq range of the batch added to
--     gap_known and not yet confirmed marked; its rows still unpublished at
--     the next start were counted twice.
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS gap_seq bigint;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS gap_known_seq bigint;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS gap_known bigint;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS gap_deletes bigint;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS gap_unseen bigint;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS gap_reported bigint NOT NULL DEFAULT 0;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS gap_stats_reset timestamptz;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS gap_at timestamptz;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS gap_batch_from bigint;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS gap_batch_to bigint;

---- create above / drop below ----

ALTER TABLE pgoutbox_state DROP COLUMN IF EXISTS gap_seq, DROP COLUMN IF EXISTS gap_known_seq,
  DROP COLUMN IF EXISTS gap_known, DROP COLUMN IF EXISTS gap_deletes, DROP COLUMN IF EXISTS gap_unseen,
  DROP COLUMN IF EXISTS gap_reported, DROP COLUMN IF EXISTS gap_stats_reset, DROP COLUMN IF EXISTS gap_at,
  DROP COLUMN IF EXISTS gap_batch_from, DROP COLUMN IF EXISTS gap_batch_to;
