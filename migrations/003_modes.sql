-- What the pipeline is doing and why: every switch between WAL and polling
-- records its reason; slot_losses counts slots lost and replaced.
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS mode_reason text;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS mode_since timestamptz NOT NULL DEFAULT now();
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS switches bigint NOT NULL DEFAULT 0;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS slot_losses bigint NOT NULL DEFAULT 0;

---- create above / drop below ----

ALTER TABLE pgoutbox_state DROP COLUMN IF EXISTS mode_reason, DROP COLUMN IF EXISTS mode_since,
  DROP COLUMN IF EXISTS switches, DROP COLUMN IF EXISTS slot_losses;
