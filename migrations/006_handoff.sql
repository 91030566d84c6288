-- A handoff in progress: a slot was created and polling must publish every
-- transaction below handoff_xmax before the slot is streamed. Kept here so
-- that a restart in the middle resumes it instead of skipping those rows.
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS handoff_pending boolean NOT NULL DEFAULT false;
ALTER TABLE pgoutbox_state ADD COLUMN IF NOT EXISTS handoff_xmax xid8;

---- create above / drop below ----

ALTER TABLE pgoutbox_state DROP COLUMN IF EXISTS handoff_pending, DROP COLUMN IF EXISTS handoff_xmax;
