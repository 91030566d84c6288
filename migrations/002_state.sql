-- One row per pipeline (named by its slot): the relay's cursors. The slot
-- holds the WAL position; this row remembers that the slot existed, the
-- last position confirmed to it, and the published floor polling starts from.
CREATE TABLE IF NOT EXISTS pgoutbox_state (
  pipeline      text        PRIMARY KEY,
  outbox_table  text        NOT NULL,
  mode          text        NOT NULL DEFAULT 'wal',
  confirmed_lsn pg_lsn,
  floor_xid     xid8,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now()
);

---- create above / drop below ----

DROP TABLE IF EXISTS pgoutbox_state;
