-- Events that could not be published (poison rows), with the reason and the
-- row as it was read. An aggregate with an event here that is not replayed
-- is held: its later events join it, in order, until pgoutbox dlq replay.
CREATE TABLE IF NOT EXISTS pgoutbox_dead_letter (
  id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  pipeline     text        NOT NULL,
  outbox_table text        NOT NULL,
  event_id     text,
  aggregate_id text        NOT NULL,
  lsn          pg_lsn,
  txid         text,
  reason       text        NOT NULL,
  row_data     jsonb       NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  replayed_at  timestamptz,
  resolution   text
);

CREATE INDEX IF NOT EXISTS pgoutbox_dead_letter_open ON pgoutbox_dead_letter (pipeline, aggregate_id) WHERE replayed_at IS NULL;

---- create above / drop below ----

DROP TABLE IF EXISTS pgoutbox_dead_letter;
