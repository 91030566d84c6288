-- A publication FOR ALL TABLES (Debezium's default,
-- publication.autocreate.mode=all_tables) publishes the updates of every
-- table of the database, pgoutbox's own included, and PostgreSQL refuses
-- an UPDATE of a published table that has no replica identity: the
-- version's own update, at the end of every migration, failed there. A
-- primary key is its replica identity. pgoutbox's other tables have one.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_index WHERE indrelid = 'pgoutbox_schema_version'::regclass AND indisprimary) THEN
    ALTER TABLE pgoutbox_schema_version ADD PRIMARY KEY (version);
  END IF;
END
$$;

---- create above / drop below ----

ALTER TABLE pgoutbox_schema_version DROP CONSTRAINT IF EXISTS pgoutbox_schema_version_pkey;
