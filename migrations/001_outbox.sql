-- The outbox table (column names follow Debezium's outbox defaults) and the
-- partial index the poller reads unpublished rows through.
CREATE TABLE IF NOT EXISTS {{.table}} (
  id            uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
  aggregatetype text        NOT NULL,
  aggregateid   text        NOT NULL,
  type          text        NOT NULL,
  payload       jsonb       NOT NULL,
  headers       jsonb,
  created_at    timestamptz NOT NULL DEFAULT now(),
  seq           bigint      GENERATED ALWAYS AS IDENTITY,
  txid          xid8        NOT NULL DEFAULT pg_current_xact_id(),
  published_at  timestamptz
);

CREATE INDEX IF NOT EXISTS {{.index_prefix}}_unpublished ON {{.table}} (seq) WHERE published_at IS NULL;

---- create above / drop below ----

DROP TABLE IF EXISTS {{.table}};
