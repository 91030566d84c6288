-- Which cluster the saved positions belong to. A dump and restore, or an
-- upgrade, moves this row to a cluster whose transaction ids and WAL
-- positions mean something else; the relay compares system_identifier with
-- the cluster's own and never skips rows on the strength of positions from
-- elsewhere.
--   system_identifier: the cluster confirmed_lsn and floor_xid were saved on.
--   floor_seq: the outbox sequence's value read with floor_xid; every row
--     written later, on this cluster or a copy of it, has a higher seq.
--   foreign_floor_xid, foreign_floor_seq: the floor saved on the cluster the
--     rows came from; a copied row is skipped only if its seq is at most
--     foreign_floor_seq and its txid below foreign_floor_xid.
--   handoff_seq: the sequence's value read right after a handoff's slot was
--     created; the handoff also covers copied rows up to it.
--   cluster_changed_at, previous_system_identifier, cluster_change: when a
--     change of cluster was seen, from which cluster, and what was done.
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS system_identifier bigint;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS floor_seq bigint;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS foreign_floor_xid xid8;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS foreign_floor_seq bigint;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS handoff_seq bigint;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS cluster_changed_at timestamptz;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS previous_system_identifier bigint;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS cluster_change text;

---- create above / drop below ----

ALTER TABLE pgoutbox_state DROP COLUMN IF EXISTS system_identifier, DROP COLUMN IF EXISTS floor_seq,
  DROP COLUMN IF EXISTS foreign_floor_xid, DROP COLUMN IF EXISTS foreign_floor_seq,
  DROP COLUMN IF EXISTS handoff_seq, DROP COLUMN IF EXISTS cluster_changed_at,
  DROP COLUMN IF EXISTS previous_system_identifier, DROP COLUMN IF EXISTS cluster_change;
