-- unended_producer_id, unended_epoch: the last Kafka transaction a relay of
-- the pipeline left open under exactly-once delivery with records in it and
-- no commit asked for (a session that failed, a stop while Kafka was
-- unreachable). Nobody committed it; if Kafka's coordinator lost track of
-- it, the next session, in any process, aborts it instead of waiting
-- behind it for good.
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS unended_producer_id bigint;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS unended_epoch smallint;

---- create above / drop below ----

ALTER TABLE pgoutbox_state DROP COLUMN IF EXISTS unended_epoch;
ALTER TABLE pgoutbox_state DROP COLUMN IF EXISTS unended_producer_id;
