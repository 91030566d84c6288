-- broker: the broker the relay publishes to ("kafka", "nats-jetstream"),
-- which kafka_problem is the problem of; saved with it, read by status to
-- name the problem. NULL before a relay of this version saved it: Kafka.
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS broker text;

---- create above / drop below ----

ALTER TABLE pgoutbox_state DROP COLUMN IF EXISTS broker;
