-- One relay publishes for a pipeline at a time: the one that holds its
-- lease. The lease lives here, not in a session (a session's advisory lock
-- does not survive a transaction pooler, which hands the server connection
-- to other clients between transactions).
--   holder: which relay (host, process, start) holds it.
--   token: the fencing token, one more at every acquisition. The statement
--     that marks rows published, and the writes of a pipeline's state,
--     check it, so a relay whose lease was taken over changes nothing.
--   expires_at: the holder renews it well before; once it has passed,
--     another relay may take the lease over.
--   lock_pid: the server process that holds the pipeline's advisory lock
--     for the holder (direct connections only); once that process no
--     longer holds it, the holder's session is gone and the lease may be
--     taken over before it expires.
CREATE TABLE IF NOT EXISTS pgoutbox_lease (
  pipeline    text        PRIMARY KEY,
  holder      text        NOT NULL,
  token       bigint      NOT NULL,
  expires_at  timestamptz NOT NULL,
  lock_pid    integer,
  acquired_at timestamptz NOT NULL DEFAULT now(),
  renewed_at  timestamptz NOT NULL DEFAULT now()
);

-- A relay's role that may write the state table may hold the lease: a
-- least-privilege setup granted on pgoutbox_state keeps working after the
-- upgrade that adds this table.
DO $$
DECLARE g record;
BEGIN
  FOR g IN SELECT DISTINCT a.grantee FROM pg_class c, aclexplode(c.relacl) a
    WHERE c.oid = to_regclass('pgoutbox_state') AND a.privilege_type = 'UPDATE' AND a.grantee <> c.relowner
  LOOP
    IF g.grantee = 0 THEN
      GRANT SELECT, INSERT, UPDATE ON pgoutbox_lease TO PUBLIC;
    ELSE
      EXECUTE format('GRANT SELECT, INSERT, UPDATE ON pgoutbox_lease TO %s', g.grantee::regrole);
    END IF;
  END LOOP;
END $$;

---- create above / drop below ----

DROP TABLE IF EXISTS pgoutbox_lease;
