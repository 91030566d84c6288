package replication

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgoutbox/pgoutbox/outbox"
	"github.com/pgoutbox/pgoutbox/rawconn"
)

// replicationConfig is the connection configuration of a logical
// replication connection to databaseURL.
func replicationConfig(databaseURL string) (*pgconn.Config, error) {
	pgcfg, err := pgconn.ParseConfig(databaseURL)
	if err != nil {
		return nil, errors.New("parse database URL: invalid connection string") // pgx may echo the password
	}
	if err := applyIAM(pgcfg); err != nil {
		return nil, err
	}
	if pgcfg.ConnectTimeout == 0 {
		pgcfg.ConnectTimeout = ConnectTimeout
	}
	// The stream's socket carries every event: its reads skip the
	// scheduler's system-call path (see package rawconn).
	pgcfg.DialFunc = rawconn.Dial(&net.Dialer{KeepAlive: 5 * time.Minute})
	for _, p := range pgxParams {
		delete(pgcfg.RuntimeParams, p) // pgx's, not the server's: a startup message with them is refused
	}
	pgcfg.RuntimeParams["replication"] = "database"
	if pgcfg.RuntimeParams["application_name"] == "" {
		pgcfg.RuntimeParams["application_name"] = "pgoutbox"
	}
	return pgcfg, nil
}

// TryReplication finds out whether the role of databaseURL may stream, by
// trying: it opens a logical replication connection and runs
// IDENTIFY_SYSTEM. Whatever grants replication passes, the REPLICATION
// attribute or a managed service's own way (membership in rds_replication
// on Amazon RDS). A refusal is *RefusedError with what to change, phrased
// from what conn's catalog says about the role; other failures (the
// server's connection limit, the network) are returned as they are.
func TryReplication(ctx context.Context, conn *pgx.Conn, databaseURL string) error {
	pgcfg, err := replicationConfig(databaseURL)
	if err != nil {
		return err
	}
	rc, err := pgconn.ConnectConfig(ctx, pgcfg)
	if err == nil {
		_, err = pglogrepl.IdentifySystem(ctx, rc)
		rc.Close(context.Background())
		if err == nil {
			return nil
		}
	}
	// 28000 (up to PostgreSQL 15) and 42501 (16 and later): the role may
	// not start a WAL sender.
	pgErr, refused := walSenderRefused(err)
	if !refused {
		return fmt.Errorf("replication connection: %w", tlsRefused(err))
	}
	return &RefusedError{Advice: replicationAdvice(ctx, conn, pgErr)}
}

// RefusedError is the server refusing the role a replication connection;
// Advice says what to change. It is ErrNotReady.
type RefusedError struct{ Advice string }

func (e *RefusedError) Error() string { return ErrNotReady.Error() + ": " + e.Advice }

func (e *RefusedError) Is(target error) bool { return target == ErrNotReady }

// replicationAdvice says what lets the current role stream, from its
// attribute and memberships. PostgreSQL grants replication only through
// the role's own REPLICATION attribute (or superuser), never through
// membership; Amazon RDS and Aurora grant it through rds_replication.
func replicationAdvice(ctx context.Context, conn *pgx.Conn, refusal *pgconn.PgError) string {
	var (
		role          string
		attribute     bool
		rds           bool
		memberOf      []string
		refusedReason = refusal.Message
	)
	err := conn.QueryRow(ctx, `
SELECT current_user, rolreplication OR rolsuper,
       EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'rds_replication'),
       ARRAY(SELECT g.rolname::text FROM pg_roles g
             WHERE g.rolreplication AND g.rolname <> current_user AND pg_has_role(current_user, g.oid, 'MEMBER')
             ORDER BY 1)
FROM pg_roles WHERE rolname = current_user`).Scan(&role, &attribute, &rds, &memberOf)
	if err != nil {
		return fmt.Sprintf("the server refused a replication connection (%s)", refusedReason)
	}
	alter := fmt.Sprintf("ALTER ROLE %s REPLICATION;", pgx.Identifier{role}.Sanitize())
	grant := fmt.Sprintf("GRANT rds_replication TO %s;", pgx.Identifier{role}.Sanitize())
	switch {
	case attribute:
		return fmt.Sprintf("role %q has REPLICATION, yet the server refused its replication connection (%s): check pg_hba.conf, and that no pooler is in between", role, refusedReason)
	case len(memberOf) > 0:
		return fmt.Sprintf("role %q may not start replication (%s): it is a member of %s, but PostgreSQL does not pass REPLICATION on through membership (Amazon RDS does, for rds_replication): run %s as a superuser (on Cloud SQL or Azure, as the admin user)",
			role, refusedReason, strings.Join(memberOf, ", "), alter)
	case rds:
		return fmt.Sprintf("role %q may not start replication (%s): on Amazon RDS or Aurora run %s as the master user", role, refusedReason, grant)
	}
	return fmt.Sprintf("role %q lacks the REPLICATION attribute (%s): run %s as a superuser (on Cloud SQL or Azure, as the admin user; on Amazon RDS or Aurora, %s)",
		role, refusedReason, alter, grant)
}

// PublicationReady tells, without changing anything, whether
// EnsurePublicationFor would succeed: the publication publishes the
// tables' rows, or it is missing (or pgoutbox's and lacking something),
// create is set, and creating (or fixing) it works, tried in a
// transaction that is rolled back, waiting at most a second for locks.
// Otherwise it returns what EnsurePublicationFor would.
func PublicationReady(ctx context.Context, conn *pgx.Conn, name string, tables []outbox.Table, create bool, pub Publishes) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("look up publication: %w", err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '1s'"); err != nil {
		return fmt.Errorf("look up publication: %w", err)
	}
	_, err = EnsurePublicationFor(ctx, tx.Conn(), name, tables, create, pub)
	return err
}
