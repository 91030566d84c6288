-- The Kafka-side problem the relay sees now (a broker that does not
-- answer, a topic missing or not authorized, records failing, with the
-- topic and event named) and since when; NULL when there is none. Written
-- by the relay every few seconds and when it changes, read by status.
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS kafka_problem text;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS kafka_problem_since timestamptz;

---- create above / drop below ----

ALTER TABLE pgoutbox_state DROP COLUMN IF EXISTS kafka_problem, DROP COLUMN IF EXISTS kafka_problem_since;
